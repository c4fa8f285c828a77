//! The Redis target: one pipelined connection per task, logged in by [`Login`] at connect.

use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::redis::codec::RedisCodec;
use crate::proto::redis::count::get_calls;
use crate::proto::redis::login::Login;
use crate::proto::stream::StreamConn;
use crate::proto::target::{ServerCount, SetupError, Target};
use crate::transport::{Endpoint, TlsClient, TlsInfo};
use crate::url::TargetUrl;

pub struct RedisTarget {
    login: Login,
    verify: bool,
}

impl RedisTarget {
    /// The options this target reads from its URL's query (dispatch refuses any other): the
    /// socket form's (`redis+unix:///path?db=N&user=U&pass=P`), which `redis://` refuses, and
    /// `rediss://`'s TLS files (`cacert`, `cert`, `key`: redis-cli's names).
    pub const OPTIONS: &'static [&'static str] = &["db", "user", "pass", "cacert", "cert", "key"];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<RedisTarget, SetupError> {
        Ok(RedisTarget {
            login: Login::new(url, plan.timeouts().connect)?,
            verify: plan.verify,
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

    fn endpoint(&self) -> &Endpoint {
        &self.login.endpoint
    }

    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        self.login.open(self.verify).await
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.login.tls.as_ref().and_then(TlsClient::negotiated)
    }

    fn max_pipeline(&self) -> usize {
        usize::MAX
    }

    async fn server_count(&self) -> Result<Option<ServerCount>, String> {
        let v = get_calls(&self.login).await.map_err(|e| e.message)?;
        Ok(Some(ServerCount {
            value: v,
            source: "INFO commandstats cmdstat_get.calls".into(),
        }))
    }
}
