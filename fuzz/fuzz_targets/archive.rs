//! The `.mur.zip` reader on arbitrary bytes. Invariants: it never panics or allocates past
//! its caps; every entry it reads has exactly its declared size; and what it reads writes
//! back into an archive that reads the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::registry::archive::{self, Archive, ArchiveLimits};

fuzz_target!(|data: &[u8]| {
    let limits = ArchiveLimits {
        max_entries: 64,
        max_entry_bytes: 1 << 20,
        max_total_bytes: 2 << 20,
    };
    let Ok(a) = Archive::open(data, &limits) else {
        return;
    };
    assert!(a.entries().len() <= limits.max_entries);
    let mut files = Vec::new();
    for e in a.entries() {
        assert!(archive::safe_name(&e.name));
        match a.read(&e.name) {
            Ok(bytes) => {
                assert_eq!(bytes.len() as u64, e.size);
                files.push((e.name.clone(), bytes));
            }
            Err(_) => return,
        }
    }
    let again = archive::write(&files).unwrap();
    let b = Archive::open(&again, &limits).unwrap();
    for (name, bytes) in &files {
        assert_eq!(&b.read(name).unwrap(), bytes);
    }
});
