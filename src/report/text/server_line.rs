//! The `server` line: what the server's own counter saw against what loadgen sent, with a
//! set's redirects and each of its servers on lines of their own.

use std::fmt::Write;

use super::number::{micros, thousands};
use crate::result::sent_text;

/// What the server's own counter saw, against what loadgen sent.
pub(super) fn server_line(out: &mut String, so: &crate::result::ServerObserved) {
    match so.delta {
        Some(d) => {
            let _ = writeln!(
                out,
                "server     {} = {} (loadgen sent {}){}",
                so.source,
                thousands(d),
                sent_text(so.expected, so.unknown, thousands),
                if so.matches && so.shared {
                    ", includes the other generators' (--instance)"
                } else if so.matches {
                    ", matches"
                } else {
                    "  WARNING: counts differ"
                }
            );
        }
        None if so.not_comparable => {
            let _ = writeln!(
                out,
                "server     {} NOT COMPARABLE: {}",
                so.source,
                so.note.as_deref().unwrap_or("")
            );
        }
        None => {
            let _ = writeln!(
                out,
                "server     counter unavailable: {}",
                so.note.clone().unwrap_or_default()
            );
        }
    }
    if let Some(r) = so.redirects {
        let _ = writeln!(
            out,
            "  redirects followed: {} MOVED, {} ASK, {} TRYAGAIN, {} CLUSTERDOWN; slot map read {} times",
            thousands(r.moved),
            thousands(r.ask),
            thousands(r.tryagain),
            thousands(r.clusterdown),
            thousands(r.map_reads)
        );
    }
    // A set compared over some of its servers says so, above the ones left out.
    let left_out = so.members.iter().filter(|m| m.not_comparable).count();
    if left_out > 0 && so.delta.is_some() {
        let _ = writeln!(
            out,
            "  over {} of {} servers: the count leaves out the {left_out} not comparable",
            so.members.len() - left_out,
            so.members.len()
        );
    }
    for m in &so.members {
        if m.not_comparable {
            let _ = writeln!(
                out,
                "  {:<24} NOT COMPARABLE: {} (loadgen sent {})",
                m.server,
                m.note.as_deref().unwrap_or_default(),
                sent_text(m.expected, m.unknown, thousands)
            );
            continue;
        }
        // Each server's share and latency: a slow one shows here, not as the total's tail.
        let latency = m.latency.as_ref().map_or(String::new(), |l| {
            format!(
                "  share {:>4.1}%, p50 {} p99 {} max {}",
                m.share * 100.0,
                micros(l.p50),
                micros(l.p99),
                micros(l.max)
            )
        });
        let reconnects = match m.reconnects {
            0 => String::new(),
            n => format!(", reconnected {n} times"),
        };
        let _ = writeln!(
            out,
            "  {:<24} {} (loadgen sent {}){}{reconnects}{latency}",
            m.server,
            thousands(m.delta),
            sent_text(m.expected, m.unknown, thousands),
            if m.matches {
                ", matches"
            } else {
                "  WARNING: counts differ"
            }
        );
    }
}
