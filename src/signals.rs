//! Ctrl-C (SIGINT) and SIGTERM, the two signals that stop loadgen cleanly.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Both handlers, registered when this is made (so a signal that comes before the first wait
/// is not lost). A handler that cannot be installed never fires.
pub struct StopSignals {
    int: Option<Signal>,
    term: Option<Signal>,
}

impl StopSignals {
    pub fn install() -> StopSignals {
        StopSignals {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
        }
    }

    /// The next SIGINT or SIGTERM.
    pub async fn next(&mut self) {
        tokio::select! {
            _ = next_of(self.int.as_mut()) => {}
            _ = next_of(self.term.as_mut()) => {}
        }
    }
}

async fn next_of(sig: Option<&mut Signal>) {
    match sig {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}
