//! The agent loop's pure parts, kept below the runtime so the fuzz targets reach them: the
//! driver protocol's JSON (`wire`), a shell tool's word splitting (`words`) and the
//! sanitiser for publisher text (`sanitize`). The loop itself is `runtime::agent`.

pub mod redact;
pub mod sanitize;
pub mod wire;
pub mod words;
