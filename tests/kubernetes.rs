//! deploy/kubernetes, checked offline: a strict YAML parse (python3 + PyYAML, duplicate keys
//! and non-string ConfigMap/annotation values rejected), then the fields that make the Indexed
//! Job work: N generators, metrics on 0.0.0.0:9464 with annotations and a matching PodMonitor,
//! per-pod --instance, a shared --start-at, results on a volume, no password in clear.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// Strict YAML -> JSON: duplicate keys are an error (PyYAML silently keeps the last one), and
/// so is anything JSON cannot hold (an unquoted timestamp, for one).
const YAML_TO_JSON: &str = r#"
import json, sys, yaml
class Strict(yaml.SafeLoader):
    pass
def mapping(loader, node, deep=False):
    seen = set()
    for k, _ in node.value:
        key = loader.construct_object(k, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, "duplicate key %r" % (key,), k.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)
Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
with open(sys.argv[1]) as f:
    docs = [d for d in yaml.load_all(f, Loader=Strict) if d is not None]
print(json.dumps(docs))
"#;

/// A Python with PyYAML: the one on the PATH, else Debian's (python3-yaml).
fn python() -> Option<&'static str> {
    static PY: std::sync::OnceLock<Option<&'static str>> = std::sync::OnceLock::new();
    *PY.get_or_init(|| {
        ["python3", "/usr/bin/python3"].into_iter().find(|py| {
            Command::new(py)
                .args(["-c", "import yaml"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        })
    })
}

fn have_pyyaml() -> bool {
    let ok = python().is_some();
    if !ok {
        // As tests/common: set, and neither empty nor 0.
        if std::env::var("LOADGEN_REQUIRE_SERVERS").is_ok_and(|v| !v.is_empty() && v != "0") {
            panic!("python3 with PyYAML is needed to check deploy/kubernetes (apt-get install python3-yaml)");
        }
        eprintln!("skipped: python3 with PyYAML is not available (apt-get install python3-yaml)");
    }
    ok
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let out = Command::new(python().expect("checked by have_pyyaml"))
        .args(["-c", YAML_TO_JSON])
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{} is not valid YAML: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).expect("python printed JSON") {
        Value::Array(v) => v,
        other => panic!("expected a list of documents, got {other}"),
    }
}

struct Manifests {
    /// (file name, document)
    docs: Vec<(String, Value)>,
}

impl Manifests {
    fn load() -> Manifests {
        let mut docs = Vec::new();
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir())
            .expect("deploy/kubernetes exists")
            .map(|e| e.unwrap().path())
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
            .collect();
        names.sort();
        for p in names {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            for d in yaml_docs(&p) {
                docs.push((name.clone(), d));
            }
        }
        Manifests { docs }
    }

    fn one(&self, kind: &str) -> (&str, &Value) {
        let all: Vec<_> = self
            .docs
            .iter()
            .filter(|(_, d)| d["kind"] == kind)
            .collect();
        assert_eq!(all.len(), 1, "expected one {kind}");
        (all[0].0.as_str(), &all[0].1)
    }
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| s(x).to_string())
        .collect()
}

/// The value after `flag` in an argument list.
fn arg_after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} missing from {args:?}"));
    args.get(i + 1)
        .unwrap_or_else(|| panic!("{flag} has no value"))
}

/// Every `$(NAME)` reference in a string.
fn var_refs(x: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = x;
    while let Some(i) = rest.find("$(") {
        let tail = &rest[i + 2..];
        match tail.find(')') {
            Some(j) => {
                out.push(tail[..j].to_string());
                rest = &tail[j + 1..];
            }
            None => break,
        }
    }
    out
}

fn walk_strings<'a>(v: &'a Value, path: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::String(x) => out.push((path, x)),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk_strings(x, format!("{path}[{i}]"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                walk_strings(x, format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_manifest_parses_strictly_and_is_a_known_kind() {
    if !have_pyyaml() {
        return;
    }
    let m = Manifests::load();
    let known: BTreeMap<&str, &str> = [
        ("Job", "batch/v1"),
        ("ConfigMap", "v1"),
        ("PodMonitor", "monitoring.coreos.com/v1"),
        ("Kustomization", "kustomize.config.k8s.io/v1beta1"),
    ]
    .into_iter()
    .collect();
    for (file, d) in &m.docs {
        let kind = s(&d["kind"]);
        let api = known
            .get(kind)
            .unwrap_or_else(|| panic!("{file}: unexpected kind {kind}"));
        assert_eq!(s(&d["apiVersion"]), *api, "{file}: apiVersion of {kind}");
        if kind != "Kustomization" {
            assert!(!s(&d["metadata"]["name"]).is_empty(), "{file}: no name");
        }
    }
    for kind in ["Job", "ConfigMap", "PodMonitor", "Kustomization"] {
        m.one(kind);
    }
    // Kubernetes wants strings here; an unquoted true or 9464 is an error at apply time.
    let (_, cm) = m.one("ConfigMap");
    for (k, v) in cm["data"].as_object().expect("ConfigMap data") {
        assert!(v.is_string(), "ConfigMap data {k} is not a string: {v}");
    }
    let (_, job) = m.one("Job");
    for (k, v) in job["spec"]["template"]["metadata"]["annotations"]
        .as_object()
        .expect("pod annotations")
    {
        assert!(v.is_string(), "annotation {k} is not a string: {v}");
    }
    // The Grafana panel is JSON with the aggregate query.
    let panel: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("grafana-panel.json")).unwrap())
            .expect("grafana-panel.json is JSON");
    assert_eq!(panel["datasource"]["type"], "prometheus");
    let exprs: Vec<&str> = panel["targets"]
        .as_array()
        .expect("panel targets")
        .iter()
        .map(|t| s(&t["expr"]))
        .collect();
    assert!(
        exprs.contains(&"sum by (target) (rate(loadgen_requests_total[1m]))"),
        "{exprs:?}"
    );
}

#[test]
fn kustomization_lists_files_that_exist_and_builds_offline() {
    if !have_pyyaml() {
        return;
    }
    let m = Manifests::load();
    let (_, k) = m.one("Kustomization");
    let resources = strings(&k["resources"]);
    assert!(resources.contains(&"job.yaml".to_string()));
    assert!(resources.contains(&"configmap.yaml".to_string()));
    for r in &resources {
        assert!(dir().join(r).is_file(), "kustomization lists missing {r}");
    }
    // The PodMonitor needs the Prometheus Operator's CRD: applied on its own, not by -k.
    assert!(!resources.contains(&"podmonitor.yaml".to_string()));
    // kubectl's built-in kustomize needs no cluster; use it when it is installed.
    if let Ok(out) = Command::new("kubectl").arg("kustomize").arg(dir()).output() {
        assert!(
            out.status.success(),
            "kubectl kustomize failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("kind: Job") && text.contains("kind: ConfigMap"));
    }
}

#[test]
fn indexed_job_runs_n_generators_with_metrics_instances_start_time_and_results() {
    if !have_pyyaml() {
        return;
    }
    let m = Manifests::load();
    let (_, job) = m.one("Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let n = spec["completions"].as_u64().expect("completions");
    assert!(n >= 2, "a single generator needs no Job");
    assert_eq!(
        spec["parallelism"].as_u64(),
        Some(n),
        "all generators at once"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");

    let containers = pod["containers"].as_array().expect("containers");
    let c = containers
        .iter()
        .find(|c| c["name"] == "loadgen")
        .expect("a loadgen container");
    let mut args = strings(&c["command"]);
    args.extend(strings(&c["args"]));
    assert_eq!(args[0], "loadgen");
    assert_eq!(args[1], "run");
    assert_eq!(arg_after(&args, "--metrics"), "0.0.0.0:9464");
    assert!(arg_after(&args, "--instance").contains("$(JOB_COMPLETION_INDEX)"));
    assert!(
        arg_after(&args, "--seed").contains("$(JOB_COMPLETION_INDEX)"),
        "a key stream per generator"
    );
    assert_eq!(arg_after(&args, "--start-at"), "$(START_AT)");
    assert_eq!(
        args[2], "$(LOADGEN_TARGET)",
        "the target comes from the Secret"
    );

    // Every $(VAR) must be defined in the container's env: Kubernetes leaves unknown ones as is.
    let env = c["env"].as_array().expect("env");
    let env_by_name: BTreeMap<&str, &Value> = env.iter().map(|e| (s(&e["name"]), e)).collect();
    for a in &args {
        for v in var_refs(a) {
            assert!(
                env_by_name.contains_key(v.as_str()),
                "$({v}) in args is not in env"
            );
        }
    }
    let secret_ref = |name: &str| -> String {
        let e = env_by_name
            .get(name)
            .unwrap_or_else(|| panic!("env {name} missing"));
        assert!(
            e.get("value").is_none(),
            "env {name} must not hold a value in clear"
        );
        s(&e["valueFrom"]["secretKeyRef"]["name"]).to_string()
    };
    assert_eq!(secret_ref("LOADGEN_TARGET"), secret_ref("PGPASSWORD"));
    // START_AT (and the other settings) from the ConfigMap in this directory.
    let (_, cm) = m.one("ConfigMap");
    let cm_name = s(&cm["metadata"]["name"]);
    let start = &env_by_name["START_AT"]["valueFrom"]["configMapKeyRef"];
    assert_eq!(s(&start["name"]), cm_name);
    let key = s(&start["key"]);
    let at = s(&cm["data"][key]);
    assert!(
        loadgen::date::parse_rfc3339(at).is_ok(),
        "START_AT {at} is not what --start-at takes"
    );
    for e in env {
        if let Some(r) = e["valueFrom"].get("configMapKeyRef") {
            assert_eq!(s(&r["name"]), cm_name);
            assert!(
                cm["data"].get(s(&r["key"])).is_some(),
                "ConfigMap has no {}",
                r["key"]
            );
        }
    }
    assert_eq!(
        s(&env_by_name["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]),
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );

    // The metrics port, declared and annotated.
    let ports = c["ports"].as_array().expect("ports");
    let metrics_port = ports
        .iter()
        .find(|p| p["containerPort"] == 9464)
        .expect("containerPort 9464");
    let port_name = s(&metrics_port["name"]);
    let ann = &spec["template"]["metadata"]["annotations"];
    assert_eq!(ann["prometheus.io/scrape"], "true");
    assert_eq!(ann["prometheus.io/port"], "9464");
    assert_eq!(ann["prometheus.io/path"], "/metrics");

    // Results on a volume that both containers mount; the file names carry the index.
    let out = arg_after(&args, "-o");
    let hlog = arg_after(&args, "--hdr-log");
    assert!(out.contains("$(JOB_COMPLETION_INDEX)") && out.ends_with(".json"));
    assert!(hlog.contains("$(JOB_COMPLETION_INDEX)"));
    let mounts = c["volumeMounts"].as_array().expect("volumeMounts");
    let mount = mounts
        .iter()
        .find(|vm| out.starts_with(&format!("{}/", s(&vm["mountPath"]))))
        .expect("-o is on a mounted volume");
    let vol_name = s(&mount["name"]);
    let vol = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == vol_name)
        .expect("the result volume exists");
    assert!(
        vol.get("emptyDir").is_some() || vol.get("persistentVolumeClaim").is_some(),
        "{vol}"
    );
    // The keeper container (for kubectl cp after loadgen exits) sees the same volume.
    let keeper = containers
        .iter()
        .find(|k| k["name"] != "loadgen")
        .expect("a container that holds the results");
    assert!(keeper["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|vm| vm["name"] == vol_name && vm["mountPath"] == mount["mountPath"]));
    for k in containers {
        let all = [
            strings(&k["command"]),
            k.get("args").map(strings).unwrap_or_default(),
        ]
        .concat();
        if k["name"] != "loadgen" {
            for a in &all {
                assert!(
                    var_refs(a).is_empty(),
                    "Kubernetes would expand $( in {a:?}"
                );
            }
        }
    }

    // The PodMonitor picks these pods and this port.
    let (_, pm) = m.one("PodMonitor");
    let pod_labels = spec["template"]["metadata"]["labels"]
        .as_object()
        .expect("pod labels");
    let sel = pm["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("PodMonitor matchLabels");
    assert!(!sel.is_empty());
    for (k, v) in sel {
        assert_eq!(
            pod_labels.get(k),
            Some(v),
            "PodMonitor selects {k}={v}, pods lack it"
        );
    }
    let eps = pm["spec"]["podMetricsEndpoints"]
        .as_array()
        .expect("endpoints");
    assert!(eps
        .iter()
        .any(|e| e["port"] == port_name && e["path"] == "/metrics"));
}

#[test]
fn no_password_in_clear_anywhere() {
    if !have_pyyaml() {
        return;
    }
    let m = Manifests::load();
    let mut all = Vec::new();
    for (file, d) in &m.docs {
        walk_strings(d, file.clone(), &mut all);
        assert_ne!(
            d["kind"], "Secret",
            "{file}: a Secret with data belongs in no file"
        );
    }
    for (path, v) in &all {
        // scheme://user:password@host
        if let Some(i) = v.find("://") {
            let rest = &v[i + 3..];
            let auth = rest.split('/').next().unwrap_or("");
            assert!(
                !(auth.contains('@') && auth.split('@').next().unwrap().contains(':')),
                "{path}: URL with a password: {v}"
            );
        }
    }
    // Env vars that look like credentials come from Secrets.
    let (_, job) = m.one("Job");
    for c in job["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
    {
        for e in c["env"].as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
            let name = s(&e["name"]).to_uppercase();
            if ["PASS", "PWD", "SECRET", "TOKEN", "TARGET"]
                .iter()
                .any(|w| name.contains(w))
            {
                assert!(e.get("value").is_none(), "{name} has a value in clear");
                assert!(
                    e["valueFrom"].get("secretKeyRef").is_some(),
                    "{name} not from a Secret"
                );
            }
        }
    }
    // And the raw text of every file here (comments included).
    for entry in std::fs::read_dir(dir()).unwrap() {
        let p = entry.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        for line in text.lines() {
            let l = line.to_lowercase();
            assert!(
                !l.contains("password:")
                    || l.contains("secretkeyref")
                    || l.trim_start().starts_with('#'),
                "{}: {line}",
                p.display()
            );
        }
    }
}

#[test]
fn helper_scripts_are_valid_bash() {
    let scripts: BTreeSet<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("sh"))
        .collect();
    assert!(!scripts.is_empty());
    for p in scripts {
        let out = Command::new("bash")
            .arg("-n")
            .arg(&p)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn scaling_out_doc_covers_the_workflow() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/scaling-out.md"))
            .expect("docs/scaling-out.md");
    for needle in [
        "loadgen merge",
        "kubectl cp",
        "--start-at",
        "--instance",
        "--hdr-log",
        "grafana-panel.json",
        "sum by (target) (rate(loadgen_requests_total[1m]))",
        "PodMonitor",
    ] {
        assert!(
            doc.contains(needle),
            "docs/scaling-out.md does not mention {needle}"
        );
    }
}
