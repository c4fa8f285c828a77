//! The Redis target: one pipelined connection per task, logged in by [`Login`] at connect.

use crate::mix::{Mix, Op};
use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::pipelined::StreamConn;
use crate::proto::redis::codec::RedisCodec;
use crate::proto::redis::count::calls;
use crate::proto::redis::login::Login;
use crate::proto::target::{ServerCount, SetupError, Target};
use crate::transport::{Endpoint, TlsClient, TlsInfo};
use crate::url::TargetUrl;

pub struct RedisTarget {
    login: Login,
    mix: Mix,
    verify: bool,
    /// Keys per request (`--batch`).
    batch: usize,
    /// `--ttl`: writes carry an expiry, so an insert is `SET NX EX`, not SETNX.
    ttl: u32,
}

impl RedisTarget {
    /// The options this target reads from its URL's query (dispatch refuses any other): the
    /// socket form's (`redis+unix:///path?db=N&user=U&pass=P`), which `redis://` refuses, and
    /// `rediss://`'s TLS files (`cacert`, `cert`, `key`: redis-cli's names).
    pub const OPTIONS: &'static [&'static str] = &[
        "db",
        "user",
        "pass",
        "cacert",
        "cert",
        "key",
        crate::key_format::KEY_FORMAT,
    ];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<RedisTarget, SetupError> {
        let mut login = Login::new(url, plan.timeouts().connect)?;
        if let Some(f) = &plan.key_format {
            login.keys = f.clone();
        }
        Ok(RedisTarget {
            login,
            mix: plan.mix.clone(),
            verify: plan.verify,
            batch: plan.batch,
            ttl: plan.ttl,
        })
    }

    pub fn login(&self) -> &Login {
        &self.login
    }
}

impl Target for RedisTarget {
    type Conn = StreamConn<RedisCodec>;

    fn kind(&self) -> &'static str {
        "redis"
    }

    fn named_keys(&self) -> bool {
        true
    }

    fn key_name(&self, id: u64, out: &mut Vec<u8>) {
        self.login.keys.write(id, out)
    }

    fn endpoint(&self) -> &Endpoint {
        &self.login.endpoint
    }

    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        self.login.open(self.verify).await
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.login.tls.as_ref().and_then(TlsClient::negotiated)
    }

    const MAX_PIPELINE: usize = usize::MAX;

    fn writes(&self, _mix: &Mix) -> Result<(), SetupError> {
        Ok(())
    }

    fn batch(&self, _n: usize) -> Result<(), SetupError> {
        Ok(())
    }

    /// Reads are `cmdstat_get`; with a writing mix, inserts `cmdstat_setnx`, deletes
    /// `cmdstat_del`, and updates and upserts `cmdstat_set` (inserts too, with `--ttl`): the
    /// count of whichever of them is in the mix, of none when several are.
    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        if self.batch > 1 {
            // One MGET per request, whatever its keys.
            let (c, epoch) = calls(&self.login, &["mget"]).await.map_err(|e| e.message)?;
            let mut count = ServerCount::reads(c[0], "INFO commandstats cmdstat_mget.calls");
            count.epoch = epoch;
            return Ok(Some(count));
        }
        let (c, epoch) = calls(&self.login, &["get", "set", "setnx", "del"])
            .await
            .map_err(|e| e.message)?;
        let (get, set, setnx, del) = (c[0], c[1], c[2], c[3]);
        if self.mix.read_only() {
            let mut count = ServerCount::reads(get, "INFO commandstats cmdstat_get.calls");
            count.epoch = epoch;
            return Ok(Some(count));
        }
        // With `--ttl` an insert is a SET too (SETNX takes no expiry): counted with the others.
        let on_set: &[Op] = match self.ttl {
            0 => &[Op::Update, Op::Upsert],
            _ => &[Op::Update, Op::Upsert, Op::Insert],
        };
        let sets = match on_set.iter().filter(|o| self.mix.has(**o)).count() > 1 {
            true => ServerCount::UNCOUNTED,
            false => set,
        };
        let mut ops = vec![sets; Op::COUNT];
        ops[Op::Read.index()] = get;
        if self.ttl == 0 {
            ops[Op::Insert.index()] = setnx;
        }
        ops[Op::Delete.index()] = del;
        Ok(Some(ServerCount {
            epoch,
            value: get + set + setnx + del,
            source: "INFO commandstats calls of get, set, setnx, del".into(),
            ops,
            members: Vec::new(),
            per_request: 1,
        }))
    }
}
