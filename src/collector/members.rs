//! A set's servers one by one (a memcached pool, a Redis Cluster's nodes, SQL shards): each
//! one's own count against what loadgen routed to it, its own sends of unknown fate as the
//! range; one that could not be read or restarted is named and left out of the set's count.

use super::ServerCounts;
use crate::proto::target::MemberCount;
use crate::result::{
    count_matches, encode_histogram, sent_text, MemberObserved, Percentiles, ServerObserved,
};

/// A set one of whose servers is not comparable: its counts by op hold only some servers.
pub(super) fn partial(server: &ServerCounts) -> bool {
    match server {
        (Ok(Some(b)), Ok(Some(a))) => {
            a.members.len() != b.members.len()
                || a.members
                    .iter()
                    .zip(&b.members)
                    .any(|(a, b)| member_note(b, a).is_some())
        }
        _ => false,
    }
}

/// Each server of a pool: its counter's change against what loadgen routed to it, with its
/// own sends of unknown fate as the range. A server whose counter could not be read, or that
/// restarted, is not comparable: said, and left out of the set's count.
pub(super) fn members_observed(
    before: &[MemberCount],
    after: &[MemberCount],
) -> Vec<MemberObserved> {
    let sent = |(a, b): (&MemberCount, &MemberCount)| a.sent.saturating_sub(b.sent);
    let total: u64 = after.iter().zip(before).map(sent).sum();
    after
        .iter()
        .zip(before)
        .map(|(a, b)| {
            let delta = a.value.saturating_sub(b.value);
            let expected = sent((a, b));
            let unknown = a.unsure.saturating_sub(b.unsure).min(expected);
            // The latencies between the two reads.
            // None when it answered nothing in between: no percentiles of nothing.
            let latency = a
                .latency
                .as_ref()
                .map(|h| {
                    let mut h = h.clone();
                    if let Some(b) = &b.latency {
                        let _ = h.subtract(b);
                    }
                    h
                })
                .filter(|h| !h.is_empty());
            let note = member_note(b, a);
            MemberObserved {
                server: a.server.clone(),
                delta,
                expected,
                unknown,
                matches: note.is_none() && count_matches(delta, expected, unknown),
                not_comparable: note.is_some(),
                note,
                reconnects: a.reconnects.saturating_sub(b.reconnects),
                share: MemberObserved::share_of(expected, total),
                latency: latency.as_ref().map(Percentiles::of),
                histogram: latency.as_ref().map(encode_histogram),
            }
        })
        .collect()
}

/// Why one server of a set cannot be compared (None: it can).
fn member_note(b: &MemberCount, a: &MemberCount) -> Option<String> {
    match (&b.missing, &a.missing, &b.epoch, &a.epoch) {
        (Some(why), _, _, _) => Some(format!("not readable before the run: {why}")),
        (_, Some(why), _, _) => Some(format!("not readable after the run: {why}")),
        (_, _, Some(x), Some(y)) if !crate::proto::target::same_epoch(x, y) => {
            Some(format!("restarted during the run ({x}, then {y})"))
        }
        _ if a.value < b.value => Some(format!(
            "its counter went back from {} to {} (a restart or a reset)",
            b.value, a.value
        )),
        _ => None,
    }
}

/// A set's count over its comparable servers: each one's own count against what loadgen
/// routed to it, their unknowns as the range; the servers left out are named.
pub(super) fn over_members(o: &mut ServerObserved, what: &str) {
    let ok: Vec<&MemberObserved> = o.members.iter().filter(|m| !m.not_comparable).collect();
    let out: Vec<String> = o
        .members
        .iter()
        .filter(|m| m.not_comparable)
        .map(|m| format!("{} ({})", m.server, m.note.as_deref().unwrap_or_default()))
        .collect();
    let delta: u64 = ok.iter().map(|m| m.delta).sum();
    o.expected = ok.iter().map(|m| m.expected).sum();
    o.unknown = ok.iter().map(|m| m.unknown).sum();
    // Each server within its own range: a sum within the set's range could hide one server
    // short by what another's unknowns allow.
    o.matches = !ok.is_empty() && ok.iter().all(|m| m.matches);
    o.delta = Some(delta);
    let sent = sent_text(o.expected, o.unknown, |n| n.to_string());
    o.note = match (ok.len(), out.is_empty(), o.matches) {
        (_, true, true) => None,
        (_, true, false) => Some(format!(
            "the servers counted {delta} {what}s but loadgen sent them {sent} (warm-up included)"
        )),
        (0, _, _) => {
            (o.delta, o.not_comparable) = (None, true);
            Some(format!(
                "no server of the set is comparable: {}",
                out.join("; ")
            ))
        }
        (n, false, _) => {
            // The set's own before and after hold the servers left out.
            (o.before, o.after) = (None, None);
            Some(format!(
                "over {n} of {} servers, which counted {delta} {what}s against loadgen's {sent}; not comparable: {}",
                o.members.len(),
                out.join("; ")
            ))
        }
    };
}

/// The connections to a set's servers opened again in the run: reconnects of the run too.
pub(super) fn reopened(so: Option<&ServerObserved>) -> u64 {
    so.map_or(0, |s| s.members.iter().map(|m| m.reconnects).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(server: &str, value: u64, sent: u64, unsure: u64) -> MemberCount {
        MemberCount {
            server: server.into(),
            value,
            sent,
            latency: None,
            unsure,
            epoch: Some("run-1".into()),
            missing: None,
            reconnects: 0,
        }
    }

    fn set(members: Vec<MemberObserved>) -> ServerObserved {
        ServerObserved {
            source: "x".into(),
            delta: Some(0),
            expected: 0,
            unknown: 0,
            matches: false,
            not_comparable: false,
            note: None,
            before: Some(0),
            after: Some(0),
            shared: false,
            members,
            redirects: None,
        }
    }

    #[test]
    fn each_server_is_judged_by_its_own_unknowns() {
        let before = [member("a", 100, 10, 0), member("b", 50, 5, 1)];
        // a: 1,000 sent, none unknown, counted exactly; b: 400 sent, 3 of unknown fate, 398
        // counted (in range); a's exact count may not borrow b's unknowns.
        let after = [member("a", 1_099, 1_010, 0), member("b", 448, 405, 4)];
        let m = members_observed(&before, &after);
        assert_eq!((m[0].delta, m[0].expected, m[0].unknown), (999, 1_000, 0));
        assert!(!m[0].matches);
        assert_eq!((m[1].delta, m[1].expected, m[1].unknown), (398, 400, 3));
        assert!(m[1].matches);
        let mut o = set(m);
        over_members(&mut o, "lookup");
        assert_eq!((o.delta, o.expected, o.unknown), (Some(1_397), 1_400, 3));
        // 1,397 is inside the sum's range, but a server is exact and off by one: the set
        // differs, as its server does.
        assert!(!o.matches && !o.members[0].matches);
        assert!(
            o.note.as_deref().unwrap().contains("counted 1397"),
            "{:?}",
            o.note
        );
    }

    #[test]
    fn a_server_down_or_restarted_is_left_out_and_named() {
        let before = [
            member("a", 0, 0, 0),
            member("b", 0, 0, 0),
            member("c", 0, 0, 0),
        ];
        let mut after = [
            member("a", 700, 700, 0),
            member("b", 0, 300, 0),
            member("c", 20, 400, 0),
        ];
        after[1].missing = Some("b: connection refused".into());
        after[2].epoch = Some("run-2".into());
        let m = members_observed(&before, &after);
        assert!(m[0].matches && !m[0].not_comparable);
        assert!(m[1].not_comparable && !m[1].matches);
        assert!(m[1].note.as_deref().unwrap().contains("connection refused"));
        assert!(m[2].not_comparable);
        assert!(m[2].note.as_deref().unwrap().contains("restarted"));
        let mut o = set(m);
        over_members(&mut o, "lookup");
        assert_eq!((o.delta, o.expected), (Some(700), 700));
        assert!(o.matches && !o.not_comparable);
        let note = o.note.clone().unwrap();
        assert!(note.starts_with("over 1 of 3 servers"), "{note}");
        assert!(note.contains("b (") && note.contains("c ("), "{note}");
        assert_eq!((o.before, o.after), (None, None));
        // None comparable: the set is not comparable, with no count.
        after[0].missing = Some("a: down".into());
        let mut o = set(members_observed(&before, &after));
        over_members(&mut o, "lookup");
        assert!(o.not_comparable && !o.matches && o.delta.is_none());
    }
}
