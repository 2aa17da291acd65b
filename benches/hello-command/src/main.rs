//! The same work as examples/hello, as a WASI command: read task.md, write out/result.txt.
fn main() {
    let task = std::fs::read_to_string("task.md").unwrap_or_else(|_| String::from("(no task)"));
    let name = std::env::var("MURMUR_CAPSULE_NAME").unwrap_or_default();
    let answer = format!("hello from {name}: {}\n", task.trim());
    std::fs::create_dir_all("out").expect("out/ is creatable");
    std::fs::write("out/result.txt", &answer).expect("out/result.txt is writable");
    print!("{answer}");
}
