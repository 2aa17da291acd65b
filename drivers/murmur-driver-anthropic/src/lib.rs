//! murmur inference driver for the Anthropic Messages API: a component exporting
//! `murmur:tool/run@0.1.0` that turns the runtime's request JSON into one provider call
//! over wasi:http and the provider's answer into the runtime's response JSON. The API key
//! never reaches it: the host adds the auth header for the endpoint's origin.

pub mod map;

#[cfg(target_arch = "wasm32")]
mod guest;

#[cfg(test)]
mod tests;
