//! `mur doctor`'s report for a person, from the same JSON object `--json` prints.

use serde_json::Value;

fn s(v: &Value) -> String {
    match v {
        Value::String(t) => t.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

/// The day's spend ledger: used today of the ceiling, where the ceiling was set, the file.
fn spend(sp: &Value) -> String {
    let from = match &sp["ceiling_from"] {
        Value::Null => "the default".to_string(),
        p => s(p),
    };
    let mut out = format!(
        "  spend today     {} of {} tokens ({} UTC; ceiling from {from})\n",
        s(&sp["used_today"]),
        s(&sp["machine_tokens_per_day"]),
        s(&sp["day"])
    );
    out.push_str(&format!("  spend ledger    {}\n", s(&sp["ledger"])));
    if !sp["error"].is_null() {
        out.push_str(&format!("  spend error     {}\n", s(&sp["error"])));
    }
    out
}

/// The report as aligned lines.
pub fn render(v: &Value) -> String {
    let mut out = String::from("mur doctor: what this host can contain\n");
    out.push_str(&format!("  kernel          {}\n", s(&v["kernel"])));
    out.push_str(&format!("  landlock ABI    {}\n", s(&v["landlock_abi"])));
    out.push_str("  classes\n");
    for c in v["classes"].as_array().into_iter().flatten() {
        if c["achievable"] == true {
            out.push_str(&format!("    {:<14}yes\n", s(&c["class"])));
            continue;
        }
        let m = &c["first_missing"];
        out.push_str(&format!(
            "    {:<14}no: {}: {}\n",
            s(&c["class"]),
            s(&m["name"]),
            s(&m["error"])
        ));
        out.push_str(&format!("    {:<14}fix: {}\n", "", s(&m["fix"])));
    }
    out.push_str("  mechanisms\n");
    for m in v["mechanisms"].as_array().into_iter().flatten() {
        let state = if m["ok"] == true {
            "ok".to_string()
        } else {
            format!("missing: {}", s(&m["error"]))
        };
        out.push_str(&format!("    {:<14}{state}\n", s(&m["name"])));
    }
    let rc = &v["roost_confinement"];
    let roost = match (rc["landlock"] == true, rc["seccomp"] == true) {
        (true, true) => "would confine itself (landlock, seccomp, no_new_privs)".to_string(),
        (l, sc) => format!(
            "would confine itself only partly: landlock {}, seccomp {}",
            if l { "yes" } else { "no" },
            if sc { "yes" } else { "no" }
        ),
    };
    out.push_str(&format!("  mur-roost       {roost}\n"));
    let reg = &v["registry"];
    let held = if reg["exists"] == true {
        format!("{} artifacts", s(&reg["artifacts"]))
    } else {
        "does not exist yet".into()
    };
    out.push_str(&format!("  registry        {}: {held}\n", s(&reg["path"])));
    let sys = &v["system_registry"];
    if sys["exists"] == true {
        out.push_str(&format!(
            "  system registry {}: {} artifacts, read where yours lacks a version\n",
            s(&sys["path"]),
            s(&sys["artifacts"])
        ));
    }
    let cache = &v["cache"];
    let cached = if cache["exists"] == true {
        format!(
            "{} entries, {}",
            s(&cache["entries"]),
            size(cache["bytes"].as_u64().unwrap_or(0))
        )
    } else {
        "does not exist yet".into()
    };
    out.push_str(&format!("  compile cache   {}: {cached}\n", s(&cache["path"])));
    out.push_str(&spend(&v["spend"]));
    let m = &v["manifest"];
    if !m.is_null() {
        let verdict = if m["met"] == true {
            format!(
                "floor '{}' met here (achieved '{}')",
                s(&m["declared"]),
                s(&m["achieved"])
            )
        } else {
            format!("floor '{}' NOT met here: {}", s(&m["declared"]), s(&m["refusal"]))
        };
        out.push_str(&format!("  manifest        {}: {verdict}\n", s(&m["path"])));
    }
    out
}
