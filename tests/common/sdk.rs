//! The Python the tests' official-SDK side runs in: the virtualenv `scripts/a2a-sdk-venv.sh`
//! makes (a2a-sdk, opentelemetry-proto), `$MURMUR_A2A_SDK_PYTHON` else
//! `target/a2a-sdk-venv/bin/python3`. Without it a test fails; it never skips.

use super::capsule::repo;
use std::path::PathBuf;

pub fn python() -> PathBuf {
    let python = std::env::var_os("MURMUR_A2A_SDK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo("target/a2a-sdk-venv/bin/python3"));
    assert!(
        python.is_file(),
        "no SDK python at {}: run scripts/a2a-sdk-venv.sh (or set MURMUR_A2A_SDK_PYTHON \
         to a python with a2a-sdk==1.3.0 and opentelemetry-proto==1.45.2)",
        python.display()
    );
    python
}
