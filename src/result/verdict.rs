//! Whether a run's numbers can be trusted: computed once from the result (`crate::verdict`)
//! and shown wherever the numbers are (JSON, text report, merge).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub valid: bool,
    /// Why not, each with its numbers (empty when valid).
    pub reasons: Vec<String>,
}

impl Default for Verdict {
    fn default() -> Verdict {
        Verdict {
            valid: true,
            reasons: Vec::new(),
        }
    }
}

impl Verdict {
    pub fn from(reasons: Vec<String>) -> Verdict {
        Verdict {
            valid: reasons.is_empty(),
            reasons,
        }
    }

    /// Many runs as one: invalid if any is, each reason prefixed by its run's name.
    pub fn combine<'a>(parts: impl IntoIterator<Item = (&'a str, &'a Verdict)>) -> Verdict {
        let mut reasons = Vec::new();
        for (name, v) in parts {
            reasons.extend(v.reasons.iter().map(|r| format!("{name}: {r}")));
        }
        Verdict::from(reasons)
    }
}

/// The machine's CPU over a run, from /proc/stat: time stolen by the hypervisor and time taken
/// by processes other than loadgen and the server, each as a share of all cores' time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineLoad {
    pub cores: usize,
    pub steal_share: f64,
    pub others_share: f64,
}
