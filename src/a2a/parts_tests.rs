use super::*;
use serde_json::json;

fn one(v: Value, gen: Generation) -> Result<(Option<String>, Part), Refusal> {
    part(&v, gen).map(|(t, p)| (t.map(str::to_string), p))
}

#[test]
fn file_and_data_parts_are_read_in_both_generations() {
    let (_, p) = one(
        json!({"raw": "aGk=", "mediaType": "text/csv", "filename": "a.csv"}),
        Generation::V10,
    )
    .unwrap();
    assert_eq!(
        (
            p.kind,
            p.media_type.as_deref(),
            p.name.as_deref(),
            p.bytes.as_slice()
        ),
        (Kind::File, Some("text/csv"), Some("a.csv"), &b"hi"[..])
    );
    let (_, p) = one(json!({"raw": "aGk"}), Generation::V10).unwrap();
    assert_eq!(p.bytes, b"hi", "unpadded base64 is read");
    let (_, p) = one(
        json!({"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/csv", "name": "a.csv"}}),
        Generation::V03,
    )
    .unwrap();
    assert_eq!((p.kind, p.name.as_deref()), (Kind::File, Some("a.csv")));
    let (_, p) = one(json!({"data": {"a": 1}}), Generation::V10).unwrap();
    assert_eq!((p.kind, p.bytes.as_slice()), (Kind::Data, &b"{\"a\":1}\n"[..]));
    let (_, p) = one(json!({"kind": "data", "data": {"a": 1}}), Generation::V03).unwrap();
    assert_eq!(p.kind, Kind::Data);
    let (t, p) = one(
        json!({"text": "x", "mediaType": "text/markdown"}),
        Generation::V10,
    )
    .unwrap();
    assert_eq!(
        (t.as_deref(), p.kind, p.media_type.as_deref()),
        (Some("x"), Kind::Text, Some("text/markdown"))
    );
}

#[test]
fn references_are_not_fetched_and_malformed_parts_are_invalid() {
    for (v, gen) in [
        (json!({"url": "http://example.com/x"}), Generation::V10),
        (
            json!({"kind": "file", "file": {"uri": "http://example.com/x"}}),
            Generation::V03,
        ),
    ] {
        assert!(matches!(one(v, gen), Err(Refusal::ContentType(_))));
    }
    for (v, gen) in [
        (json!({"raw": "%%%"}), Generation::V10),
        (json!({"raw": 5}), Generation::V10),
        (json!({"raw": "aGk=", "text": "x"}), Generation::V10),
        (json!({}), Generation::V10),
        (json!({"kind": "file", "file": {}}), Generation::V03),
        (json!({"kind": "data", "data": 3}), Generation::V03),
        (
            json!({"raw": "aGk=", "filename": "x".repeat(MAX_LABEL + 1)}),
            Generation::V10,
        ),
    ] {
        assert!(matches!(one(v.clone(), gen), Err(Refusal::Invalid(_))), "{v}");
    }
}

fn named(name: Option<&str>, kind: Kind) -> Part {
    Part {
        kind,
        media_type: None,
        name: name.map(str::to_string),
        bytes: Vec::new(),
    }
}

#[test]
fn hostile_names_land_neutralised_and_collisions_are_numbered_in_order() {
    let parts = [
        named(Some("../../etc/passwd"), Kind::File),
        named(Some(".bashrc"), Kind::File),
        named(Some(".."), Kind::File),
        named(Some("a\u{0}b\nc.txt"), Kind::File),
        named(Some("C:\\x\\report.csv"), Kind::File),
        named(Some("report.csv"), Kind::File),
        named(Some("REPORT.csv"), Kind::File),
        named(None, Kind::Data),
        named(None, Kind::File),
        named(Some("é.txt"), Kind::File),
    ];
    assert_eq!(
        land_names(&parts),
        [
            "passwd",
            "_bashrc",
            "part-3",
            "a_b_c.txt",
            "report.csv",
            "report-2.csv",
            "REPORT-3.csv",
            "part-8.json",
            "part-9",
            "_.txt",
        ]
    );
    let long = named(Some(&"x".repeat(300)), Kind::File);
    assert_eq!(land_names(&[long])[0].len(), MAX_LANDED_NAME);
}
