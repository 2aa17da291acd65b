//! The OCI image manifest of a murmur artifact, built for `mur push` and judged for
//! `mur pull`: schema version 2, the OCI manifest media type, a config blob holding the
//! artifact's `meta.json` under this project's config media type, and exactly one layer, the
//! `.mur.zip`, so the layer's digest is the artifact's sha256. A registry's manifest of any
//! other shape is refused before a blob is fetched.

use super::reference::digest_ok;
use serde_json::{json, Value};

/// The OCI image manifest media type.
pub const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The artifact type, and the media type of its config blob (`meta.json`).
pub const CONFIG_TYPE: &str = "application/vnd.murmur.artifact.config.v1+json";
/// The media type of the one layer (the `.mur.zip` bytes).
pub const LAYER_TYPE: &str = "application/vnd.murmur.artifact.layer.v1+zip";
/// Largest manifest read.
pub const MAX_MANIFEST_BYTES: usize = 1 << 20;
/// Largest config blob (`meta.json`) read.
pub const MAX_CONFIG_BYTES: u64 = 64 * 1024;

/// A blob as a manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: String,
    pub size: u64,
}

impl Blob {
    /// The hex of the digest (the artifact's sha256 for the layer).
    pub fn hex(&self) -> &str {
        self.digest.strip_prefix("sha256:").unwrap_or(&self.digest)
    }
}

/// What a murmur artifact's manifest names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactManifest {
    pub config: Blob,
    pub layer: Blob,
}

/// The manifest's JSON text for `config` (meta.json) and `layer` (the archive), with the
/// archive's file name as the layer's title.
pub fn build(config: &Blob, layer: &Blob, title: &str) -> String {
    json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": CONFIG_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config.digest, "size": config.size},
        "layers": [{
            "mediaType": LAYER_TYPE,
            "digest": layer.digest,
            "size": layer.size,
            "annotations": {"org.opencontainers.image.title": title},
        }],
    })
    .to_string()
}

/// Judge a registry's manifest: the shape above, or an error saying what is wrong.
/// `max_layer` bounds the archive size the manifest may declare.
pub fn parse(bytes: &[u8], max_layer: u64) -> Result<ArtifactManifest, String> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(format!("the manifest is larger than {MAX_MANIFEST_BYTES} bytes"));
    }
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    let m = v.as_object().ok_or("the manifest is not a JSON object")?;
    if m.get("schemaVersion").and_then(Value::as_u64) != Some(2) {
        return Err("the manifest's schemaVersion is not 2".into());
    }
    match m.get("mediaType") {
        None => {}
        Some(t) if t.as_str() == Some(MANIFEST_TYPE) => {}
        Some(_) => return Err(format!("the manifest's mediaType is not {MANIFEST_TYPE}")),
    }
    if let Some(t) = m.get("artifactType") {
        if t.as_str() != Some(CONFIG_TYPE) {
            return Err(format!("the manifest's artifactType is not {CONFIG_TYPE}"));
        }
    }
    let config = descriptor(m.get("config"), CONFIG_TYPE, MAX_CONFIG_BYTES, "config")?;
    let layers = m
        .get("layers")
        .and_then(Value::as_array)
        .ok_or("the manifest has no layers array")?;
    let [layer] = layers.as_slice() else {
        return Err(format!(
            "the manifest has {} layers; a murmur artifact has one",
            layers.len()
        ));
    };
    let layer = descriptor(Some(layer), LAYER_TYPE, max_layer, "layer")?;
    Ok(ArtifactManifest { config, layer })
}

/// One descriptor: the media type expected, a sha256 digest, a size within `max`, and no
/// `urls` (a blob fetched from elsewhere than the registry).
fn descriptor(v: Option<&Value>, media_type: &str, max: u64, what: &str) -> Result<Blob, String> {
    let d = v
        .and_then(Value::as_object)
        .ok_or_else(|| format!("the manifest's {what} is not a descriptor"))?;
    if d.get("mediaType").and_then(Value::as_str) != Some(media_type) {
        return Err(format!("the manifest's {what} is not of media type {media_type}"));
    }
    if d.contains_key("urls") {
        return Err(format!("the manifest's {what} names URLs outside the registry"));
    }
    let digest = d
        .get("digest")
        .and_then(Value::as_str)
        .filter(|s| digest_ok(s))
        .ok_or_else(|| format!("the manifest's {what} digest is not sha256:<64 lowercase hex>"))?;
    let size = d
        .get("size")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("the manifest's {what} has no size"))?;
    if size > max {
        return Err(format!("the manifest's {what} is {size} bytes, more than {max}"));
    }
    Ok(Blob {
        digest: digest.to_string(),
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(c: char, size: u64) -> Blob {
        Blob {
            digest: format!("sha256:{}", c.to_string().repeat(64)),
            size,
        }
    }

    #[test]
    fn a_built_manifest_parses_back() {
        let text = build(&blob('a', 10), &blob('b', 20), "x-1.mur.zip");
        let m = parse(text.as_bytes(), 100).unwrap();
        assert_eq!((&m.config, &m.layer), (&blob('a', 10), &blob('b', 20)));
        assert_eq!(m.layer.hex(), "b".repeat(64));
    }

    #[test]
    fn manifests_of_another_shape_are_refused() {
        let good: Value = serde_json::from_str(&build(&blob('a', 10), &blob('b', 20), "t")).unwrap();
        let with = |f: &dyn Fn(&mut Value)| {
            let mut v = good.clone();
            f(&mut v);
            parse(v.to_string().as_bytes(), 100)
        };
        assert!(with(&|v| v["schemaVersion"] = json!(1)).is_err());
        assert!(with(&|v| v["mediaType"] = json!("application/vnd.oci.image.index.v1+json")).is_err());
        assert!(with(&|v| v["artifactType"] = json!("application/x")).is_err());
        assert!(
            with(&|v| v["config"]["mediaType"] = json!("application/vnd.oci.image.config.v1+json")).is_err()
        );
        assert!(
            with(&|v| v["layers"][0]["mediaType"] = json!("application/vnd.oci.image.layer.v1.tar")).is_err()
        );
        assert!(with(&|v| v["layers"][0]["digest"] = json!("sha256:AB")).is_err());
        assert!(with(&|v| v["layers"][0]["urls"] = json!(["http://x/"])).is_err());
        assert!(with(&|v| v["layers"][0]["size"] = json!(101)).is_err());
        assert!(with(&|v| v["layers"][0]["size"] = json!(-1)).is_err());
        assert!(with(&|v| v["config"]["size"] = json!(MAX_CONFIG_BYTES + 1)).is_err());
        assert!(with(&|v| {
            let l = v["layers"][0].clone();
            v["layers"].as_array_mut().unwrap().push(l);
        })
        .is_err());
        assert!(with(&|v| v["layers"] = json!([])).is_err());
        assert!(with(&|v| {
            v.as_object_mut().unwrap().remove("mediaType");
        })
        .is_ok());
        assert!(parse(b"[]", 100).is_err());
        assert!(parse(&vec![b' '; MAX_MANIFEST_BYTES + 1], 100).is_err());
    }
}
