//! The Python the tests' official-SDK side runs in: the virtualenv `scripts/a2a-sdk-venv.sh`
//! makes (a2a-sdk, opentelemetry-proto), `$MURMUR_A2A_SDK_PYTHON` else
//! `target/a2a-sdk-venv/bin/python3`. Without it a test fails; it never skips.

use super::capsule::repo;
use std::path::PathBuf;

/// The python of the 0.3 generation's own SDK (a2a-sdk 0.3.26), which the same script makes
/// beside it: `$MURMUR_A2A_SDK03_PYTHON` else `target/a2a-sdk-venv-0.3/bin/python3`.
pub fn python_03() -> PathBuf {
    let python = std::env::var_os("MURMUR_A2A_SDK03_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo("target/a2a-sdk-venv-0.3/bin/python3"));
    assert!(
        python.is_file(),
        "no 0.3 SDK python at {}: run scripts/a2a-sdk-venv.sh (or set MURMUR_A2A_SDK03_PYTHON \
         to a python with a2a-sdk==0.3.26)",
        python.display()
    );
    python
}

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
