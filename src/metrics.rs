//! Placeholder: the Prometheus exporter lands here (issue 5).
use std::time::Duration;

pub struct MetricsConfig {
    pub addr: String,
    pub linger: Duration,
    pub labels: Vec<(String, String)>,
    pub instance: Option<String>,
}

pub struct Exporter;

impl Exporter {
    pub async fn start(_cfg: MetricsConfig) -> Result<Exporter, String> {
        Err("--metrics is not implemented yet".into())
    }
    pub fn hook(&self) -> crate::run::Hook {
        std::sync::Arc::new(|_| {})
    }
    pub async fn finish(self) {}
}
