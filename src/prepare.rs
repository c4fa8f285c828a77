//! `loadgen prepare URL --rows N`: create the `usr` table (or keys) and load the rows that
//! `--verify` expects. Each protocol loads its own way (`proto::<name>::prepare`); the protocol
//! table says which can.

use std::time::Instant;

use crate::key_format::{KeyFormat, KEY_FORMAT};
use crate::proto::table::{self, Load};
use crate::proto::target::SetupError;
use crate::url::{redact_text, TargetUrl};

pub struct Prepared {
    pub rows: u64,
    pub seconds: f64,
    /// Keys outside the loaded ids were removed (false on a Redis Cluster, which is not pruned).
    pub pruned: bool,
}

/// `key_format`: `--key-format`, for memcached and Redis keys.
pub async fn prepare(
    target: &str,
    keys: (u64, u64),
    key_format: Option<&KeyFormat>,
) -> Result<Prepared, SetupError> {
    let mut url = TargetUrl::parse(target)?;
    if let Some(f) = key_format {
        let named =
            table::find(&url.scheme).is_some_and(|p| ["memcache", "redis"].contains(&p.kind()));
        if !named {
            return Err(SetupError(format!(
                "--key-format names memcached and Redis keys; '{}://' stores rows by id: leave it out",
                url.scheme
            )));
        }
        url.query.push((KEY_FORMAT.to_string(), f.text()));
    }
    let label = url.redacted();
    let start = Instant::now();
    let load = match table::find(&url.scheme).map(|p| &p.load) {
        Some(Load::By(load)) => load,
        found => {
            let why = match found {
                Some(Load::Not(why)) => format!(" ({why})"),
                _ => String::new(),
            };
            return Err(SetupError(format!(
                "cannot prepare '{}://' targets: use one of {}{why}",
                url.scheme,
                table::loadable_schemes()
            )));
        }
    };
    let rows = load(&url, keys)
        .await
        .map_err(|e| SetupError(format!("{label}: {}", redact_text(&e))))?;
    Ok(Prepared {
        rows,
        seconds: start.elapsed().as_secs_f64(),
        pruned: url.param("cluster") != Some("1"),
    })
}
