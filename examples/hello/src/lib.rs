//! The hello capsule: reads `task.md` from its workdir and writes `out/result.txt`.
wit_bindgen::generate!({ path: "../../wit", world: "murmur:capsule/capsule", generate_all });

use exports::murmur::capsule::run::Guest;
struct Hello;

impl Guest for Hello {
    fn run() {
        let task = std::fs::read_to_string("task.md").unwrap_or_else(|_| String::from("(no task)"));
        let name = std::env::var("MURMUR_CAPSULE_NAME").unwrap_or_default();
        let answer = format!("hello from {name}: {}\n", task.trim());
        std::fs::create_dir_all("out").expect("out/ is creatable in the workdir");
        std::fs::write("out/result.txt", &answer).expect("out/result.txt is writable");
        print!("{answer}");
    }
}

export!(Hello);
