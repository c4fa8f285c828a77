//! `loadgen prepare URL --rows N`: create the `usr` table (or keys) and load the rows that
//! `--verify` expects. Each protocol loads its own way (`proto::<name>::prepare`); the protocol
//! table says which can.

use std::time::Instant;

use crate::key_format::{KeyFormat, KEY_FORMAT};
use crate::proto::shards::ranges::{self, Ranges, Shard};
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
    if let Some(shards) = ranges::parse(target)? {
        return prepare_shards(&shards, keys).await;
    }
    let mut url = TargetUrl::parse(target)?;
    if let Some(f) = key_format {
        let named =
            table::find(&url.scheme).is_some_and(|p| p.drivers.iter().any(|d| d.caps.named_keys));
        if !named {
            return Err(SetupError(format!(
                "--key-format names {} keys; '{}://' stores rows by id: leave it out",
                table::who(&|c| c.named_keys),
                url.scheme
            )));
        }
        url.query.push((KEY_FORMAT.to_string(), f.text()));
    }
    let label = url.redacted();
    let start = Instant::now();
    let load = loader(&url)?;
    let rows = load(&url, keys)
        .await
        .map_err(|e| SetupError(format!("{label}: {}", redact_text(&e))))?;
    Ok(Prepared {
        rows,
        seconds: start.elapsed().as_secs_f64(),
        pruned: url.param("cluster") != Some("1"),
    })
}

/// Each shard loads the ids of `keys` in its range (the first range open below, the last
/// above, as the run routes them); a shard with none gets the empty table.
async fn prepare_shards(shards: &[Shard], keys: (u64, u64)) -> Result<Prepared, SetupError> {
    let start = Instant::now();
    let mut rows = 0;
    for (i, shard) in shards.iter().enumerate() {
        let load = loader(&shard.url)?;
        let share = Ranges::share(shards, i, keys).unwrap_or((1, 0));
        rows += load(&shard.url, share)
            .await
            .map_err(|e| SetupError(format!("{}: {}", shard.url.redacted(), redact_text(&e))))?;
    }
    Ok(Prepared {
        rows,
        seconds: start.elapsed().as_secs_f64(),
        pruned: true,
    })
}

/// How `prepare` loads `url`'s protocol, or the line saying it cannot.
fn loader(url: &TargetUrl) -> Result<table::Loader, SetupError> {
    match table::find(&url.scheme).map(|p| &p.load) {
        Some(Load::By(load)) => Ok(*load),
        found => {
            let why = match found {
                Some(Load::Not(why)) => format!(" ({why})"),
                _ => String::new(),
            };
            Err(SetupError(format!(
                "cannot prepare '{}://' targets: use one of {}{why}",
                url.scheme,
                table::loadable_schemes()
            )))
        }
    }
}
