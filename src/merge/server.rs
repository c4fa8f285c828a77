//! What the server said of merged runs: its CPU and its own count of the requests, charged
//! once when the generators shared it, added up when each had its own.

use crate::result::{
    count_matches, decode_histogram, encode_histogram, sent_text, ClientCpu, MemberObserved,
    OpResult, Percentiles, RunResult, ServerCpu, ServerObserved,
};

/// The server's CPU charged once. Generators that ran together on one server each read all of
/// its CPU over their own (overlapping) window: the highest reading stands for it, spread over
/// every generator's requests. Different servers, or runs one after another: readings add up.
/// `hosts`: each run's machine (hostname, cores).
pub(super) fn merge_server_cpu(
    hosts: &[(&str, usize)],
    runs: &[&RunResult],
    concurrent: bool,
    requests: u64,
    client: &ClientCpu,
) -> Option<ServerCpu> {
    let cpus: Vec<&ServerCpu> = runs.iter().filter_map(|r| r.server_cpu.as_ref()).collect();
    let first = *cpus.first()?;
    let readings: Option<Vec<f64>> = cpus.iter().map(|c| c.cpu_s).collect();
    let (Some(readings), true) = (readings, cpus.len() == runs.len()) else {
        let note = cpus.iter().find_map(|c| c.note.clone());
        return Some(ServerCpu {
            note: note.or_else(|| Some("not every generator read the server's CPU".into())),
            ..ServerCpu::default()
        });
    };
    let one_server = cpus.iter().zip(hosts).all(|(c, h)| {
        c.pid.is_some() && c.pid == first.pid && c.process == first.process && h.0 == hosts[0].0
    });
    let cpu_s = if one_server && concurrent {
        readings.iter().copied().fold(0.0, f64::max)
    } else {
        readings.iter().sum()
    };
    let per_request_us = (requests > 0).then(|| cpu_s * 1e6 / requests as f64);
    let cores = hosts[0].1.max(1) as f64;
    let cpu_bound_qps = per_request_us
        .filter(|s| s + client.per_request_us > 0.0)
        .map(|s| (cores * 1e6 / (s + client.per_request_us)).round());
    Some(ServerCpu {
        pid: first.pid.filter(|_| one_server),
        process: first.process.clone().filter(|_| one_server),
        cpu_s: Some(round3(cpu_s)),
        per_request_us: per_request_us.map(round3),
        cpu_bound_qps,
        note: None,
    })
}

/// The server's count against what the generators sent together. Generators that ran together
/// on one server each counted the others' requests too: the server's change from the earliest
/// read before to the latest read after spans every run, and is compared with the sum of what
/// they sent. Otherwise (runs one after another, or each on its own server) the counts add up.
pub(super) fn merge_observed(
    runs: &[&RunResult],
    concurrent: bool,
    label: &str,
    warnings: &mut Vec<String>,
) -> Option<ServerObserved> {
    let obs: Option<Vec<&ServerObserved>> =
        runs.iter().map(|r| r.server_observed.as_ref()).collect();
    let obs = obs?;
    let first = *obs.first()?;
    if obs
        .iter()
        .any(|o| o.delta.is_none() || o.source != first.source)
    {
        return None;
    }
    let expected: u64 = obs.iter().map(|o| o.expected).sum();
    let shared = runs.len() > 1
        && concurrent
        && runs.iter().all(|r| r.target == runs[0].target)
        && obs
            .iter()
            .any(|o| o.shared || o.delta.is_some_and(|d| d > o.expected));
    let delta = if shared {
        let reads: Option<Vec<(u64, u64)>> =
            obs.iter().map(|o| Some((o.before?, o.after?))).collect();
        let Some(reads) = reads else {
            warnings.push(format!(
                "{label}: the server's count is left out: the generators ran together on one server \
                 and a file from an older loadgen lacks the counter's reads"
            ));
            return None;
        };
        let before = reads.iter().map(|r| r.0).min()?;
        let after = reads.iter().map(|r| r.1).max()?;
        after.saturating_sub(before)
    } else {
        obs.iter().filter_map(|o| o.delta).sum()
    };
    // Errors other than connect failures may or may not have reached the server (a file from
    // before `unknown` was recorded: its errors stand for it).
    let unsure: u64 = runs
        .iter()
        .zip(&obs)
        .map(|(r, o)| {
            o.unknown
                .max(r.error_total - r.errors.get("connect").copied().unwrap_or(0))
        })
        .sum();
    let matches = count_matches(delta, expected, unsure);
    Some(ServerObserved {
        source: first.source.clone(),
        delta: Some(delta),
        expected,
        unknown: unsure,
        matches,
        note: (!matches).then(|| {
            format!(
                "the server counted {delta} but the generators sent {} together (warm-up included)",
                sent_text(expected, unsure, |n| n.to_string())
            )
        }),
        before: None,
        after: None,
        shared: false,
        not_comparable: obs.iter().any(|o| o.not_comparable),
        members: merge_members(&obs, shared, unsure),
        redirects: obs.iter().filter_map(|o| o.redirects).reduce(|a, b| a + b),
    })
}

/// Each server of a set (a pool, a cluster) across the generators, by its address: what they
/// routed to it adds up. Its count adds up too when each counted only its own requests; when
/// they ran together on the set, each generator's count holds the others' requests, and the
/// widest reading (the generator whose window held the others') stands for it, checked for
/// holding every request routed there.
fn merge_members(obs: &[&ServerObserved], shared: bool, unsure: u64) -> Vec<MemberObserved> {
    let mut merged: Vec<MemberObserved> = Vec::new();
    for m in obs.iter().flat_map(|o| &o.members) {
        match merged.iter_mut().find(|x| x.server == m.server) {
            Some(x) => {
                x.expected += m.expected;
                x.delta = if shared {
                    x.delta.max(m.delta)
                } else {
                    x.delta + m.delta
                };
            }
            None => merged.push(m.clone()),
        }
    }
    let total: u64 = merged.iter().map(|m| m.expected).sum();
    for m in &mut merged {
        m.unknown = unsure.min(m.expected);
        m.matches = (shared || m.delta <= m.expected) && m.delta + m.unknown >= m.expected;
        m.share = MemberObserved::share_of(m.expected, total);
        // Each server's latency over every generator: their histograms added.
        let parts = obs.iter().flat_map(|o| &o.members);
        let hists: Option<Vec<_>> = parts
            .filter(|x| x.server == m.server)
            .map(|x| {
                x.histogram
                    .as_deref()
                    .and_then(|h| decode_histogram(h).ok())
            })
            .collect();
        let sum = hists.and_then(|h| {
            h.into_iter().reduce(|mut a, b| {
                let _ = a.add(&b);
                a
            })
        });
        m.latency = sum.as_ref().map(Percentiles::of);
        m.histogram = sum.as_ref().map(encode_histogram);
    }
    merged
}

/// The server's counts of one op, summed, when every part read one and each count was the
/// part's own: a part whose count exceeds what it sent while the parts ran together shared the
/// server with them, and every part's count holds the others' requests too.
pub(super) fn sum_observed(
    parts: &[(&str, &OpResult)],
    concurrent: bool,
    what: &str,
    warnings: &mut Vec<String>,
) -> Option<ServerObserved> {
    let obs: Vec<&ServerObserved> = parts
        .iter()
        .filter_map(|(_, o)| o.server_observed.as_ref())
        .collect();
    if obs.len() < parts.len() {
        return None;
    }
    let shared = obs.iter().any(|o| o.delta.is_some_and(|d| d > o.expected));
    if concurrent && parts.len() > 1 && shared {
        warnings.push(format!(
            "{what}: the server's count is left out: the generators ran together on one server, \
             so each one's count includes the others' requests"
        ));
        return None;
    }
    let mut notes: Vec<&str> = Vec::new();
    for n in obs.iter().filter_map(|o| o.note.as_deref()) {
        if !notes.contains(&n) {
            notes.push(n);
        }
    }
    Some(ServerObserved {
        source: obs[0].source.clone(),
        delta: obs.iter().map(|o| o.delta).sum(),
        expected: obs.iter().map(|o| o.expected).sum(),
        unknown: obs.iter().map(|o| o.unknown).sum(),
        matches: obs.iter().all(|o| o.matches),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        before: None,
        after: None,
        shared: false,
        not_comparable: obs.iter().any(|o| o.not_comparable),
        members: Vec::new(),
        redirects: None,
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
