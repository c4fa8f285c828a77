//! A multi-get on a set of servers: its keys split into parts, one per server (one per hash
//! slot on a Redis Cluster, whose MGET takes keys of one slot only), sent together; every
//! server's connection is read at once, so each part's time is its own server's.
//!
//! The request loop may drop a `recv_batch` and call it again (a timer that fired for an older
//! request, a paced send that is due): each part's stage is kept here, so a reply already taken
//! is never waited for again, and a redirect cut short drops the one connection it was on
//! rather than leave it out of step.

use std::sync::atomic::Ordering;
use std::time::Instant;

use futures_util::future::join_all;

use super::parts::{lock, Part, Stage};
use super::{down_pause, hop, Redirect, Routed, MAX_HOPS, TRYAGAIN_PAUSE};
use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::proto::codec::{Codec, Tally};
use crate::proto::target::Conn;

/// A part's server did not answer within the set's bound ([`Routed::hung`]).
const HUNG: &str = "no reply in time";

impl<C: Codec + 'static> Routed<C> {
    /// Splits `keys` by owner (and slot) and sends each part to its server; a part for a
    /// server that is down is not sent, nor counted as routed there.
    pub(super) fn send_split(&mut self, keys: &[u64]) {
        let Some((router, routed)) = &self.pool else {
            return;
        };
        let m = &mut self.multi;
        m.placed.clear();
        for &id in keys {
            let (server, group) = match router.owner_id(id) {
                Some(server) => (server, server),
                None => {
                    let (key, n) = self.keys.on_stack(id);
                    router.place(&key[..n])
                }
            };
            m.placed.push((group, server, id));
        }
        // Stable: each part keeps its keys in the order drawn.
        m.placed.sort_by_key(|p| p.0);
        m.parts.clear();
        m.keys.clear();
        for run in m.placed.chunk_by(|a, b| a.0 == b.0) {
            let from = m.keys.len();
            m.keys.extend(run.iter().map(|p| p.2));
            let part = Part {
                server: run[0].1,
                from,
                to: m.keys.len(),
                out: self.conns[run[0].1].is_some(),
            };
            m.parts.push(part);
            if let Some(c) = &mut self.conns[part.server] {
                routed[part.server].fetch_add(router.weight(run.len()), Ordering::Relaxed);
                c.send_batch(&m.keys[from..part.to]);
            }
        }
        let stages = m.stages.get_mut().unwrap_or_else(|e| e.into_inner());
        stages.clear();
        stages.extend(m.parts.iter().map(|_| Stage::Waiting));
        (m.sent, m.tally, m.failed) = (Some(Instant::now()), Tally::default(), None);
    }

    /// The parts' replies summed; a part that fails fails the request, and the others are
    /// still read, so every connection stays in step.
    pub(super) async fn recv_split(&mut self) -> Result<(Outcome, Tally), LookupError> {
        self.first_replies().await;
        let mut broken = Vec::new();
        for k in 0..self.multi.parts.len() {
            let p = self.multi.parts[k];
            let stage = std::mem::replace(&mut lock(&self.multi.stages)[k], Stage::Done);
            let r = match stage {
                Stage::Done => continue,
                Stage::Got(Ok((_, t)), took) => {
                    if let Some(l) = &mut self.latency {
                        l.record(p.server, took);
                    }
                    Ok(t)
                }
                // The server's connection broke (once per server, whatever its parts), or it
                // was down already: its parts fail, and it is tried again in time.
                Stage::Got(Err(e), _) if e.message == HUNG => {
                    if !broken.contains(&p.server) {
                        broken.push(p.server);
                    }
                    Err(self.hung(p.server))
                }
                Stage::Got(Err(e), _) if e.fatal || self.conns[p.server].is_none() => {
                    if e.fatal && !broken.contains(&p.server) {
                        broken.push(p.server);
                        self.conns[p.server] = None;
                    }
                    Err(self.down(p.server, &e.message).await)
                }
                Stage::Got(Err(e), _) => {
                    lock(&self.multi.stages)[k] = Stage::Following(p.server);
                    let r = match self.redirect_of(&e) {
                        Some(r) => self.follow_part(k, p, p.server, r, e).await,
                        None => Err(e),
                    };
                    lock(&self.multi.stages)[k] = Stage::Done;
                    r
                }
                Stage::Pausing(i, e) => {
                    let r = self.follow_part(k, p, i, Redirect::TryAgain, e).await;
                    lock(&self.multi.stages)[k] = Stage::Done;
                    r
                }
                Stage::Resent(i) => {
                    // Still outstanding until the reply is in: cut short again, taken up again.
                    lock(&self.multi.stages)[k] = Stage::Resent(i);
                    let r = match self.reply_at(k, p, i, true).await {
                        Ok(Ok(t)) => Ok(t),
                        Ok(Err((r, e))) => self.follow_part(k, p, i, r, e).await,
                        Err(e) => Err(e),
                    };
                    lock(&self.multi.stages)[k] = Stage::Done;
                    r
                }
                // A redirect cut short: its reply may yet come on that connection.
                Stage::Following(i) => {
                    self.conns[i] = None;
                    Err(self.down(i, "a redirected multi-get was interrupted").await)
                }
                Stage::Waiting => Err(LookupError::protocol("a multi-get part was not read")),
            };
            if let (Err(_), true) = (&r, p.out) {
                let n = self
                    .pool
                    .as_ref()
                    .map_or(0, |(r, _)| r.weight(p.to - p.from));
                self.unsure(p.server, n);
            }
            let m = &mut self.multi;
            match r {
                Ok(t) => {
                    (m.tally.hits, m.tally.misses) =
                        (m.tally.hits + t.hits, m.tally.misses + t.misses)
                }
                Err(e) => m.failed = m.failed.take().or(Some(e)),
            }
        }
        match self.multi.failed.take() {
            Some(e) => Err(e),
            None => Ok((self.multi.tally.outcome(), self.multi.tally)),
        }
    }

    /// Takes the first reply of every part still waiting, each server's connection read at
    /// the same time; a part whose server is down fails as a connect error.
    async fn first_replies(&mut self) {
        let m = &self.multi;
        let since = m.sent.unwrap_or_else(Instant::now);
        {
            let mut stages = lock(&m.stages);
            for (k, p) in m.parts.iter().enumerate() {
                if matches!(stages[k], Stage::Waiting) && self.conns[p.server].is_none() {
                    let e = LookupError::new(ErrorKind::Connect, false, "not connected");
                    stages[k] = Stage::Got(Err(e), 0);
                }
            }
        }
        let (parts, keys, stages) = (&m.parts, &m.keys, &m.stages);
        let waiting = |i: usize| {
            let s = lock(stages);
            parts
                .iter()
                .enumerate()
                .any(|(k, p)| p.server == i && matches!(s[k], Stage::Waiting))
        };
        let deadline = since.checked_add(self.hang_after);
        let each = self.conns.iter_mut().enumerate().filter_map(|(i, c)| {
            let c = c.as_mut().filter(|_| waiting(i))?;
            Some(async move {
                for (k, p) in parts.iter().enumerate().filter(|(_, p)| p.server == i) {
                    if !matches!(lock(stages)[k], Stage::Waiting) {
                        continue;
                    }
                    let reply = c.recv_batch(&keys[p.from..p.to]);
                    // A server that does not answer in time fails its parts alone.
                    let r = match deadline {
                        Some(d) => tokio::time::timeout_at(d.into(), reply)
                            .await
                            .unwrap_or_else(|_| {
                                Err(LookupError::new(ErrorKind::Timeout, true, HUNG))
                            }),
                        None => reply.await,
                    };
                    lock(stages)[k] = Stage::Got(r, since.elapsed().as_nanos() as u64);
                }
            })
        });
        join_all(each).await;
    }

    /// Follows part `k`'s error reply `e` when it is a redirect (and any redirect after it);
    /// otherwise `e` stands. Called once every part's first reply is taken: with the
    /// connections idle, an `ASKING` and the part sent again cannot meet another reply.
    /// `r` is the redirect `e` asked of server `i`, already counted.
    async fn follow_part(
        &mut self,
        k: usize,
        p: Part,
        mut i: usize,
        mut r: Redirect,
        mut e: LookupError,
    ) -> Result<Tally, LookupError> {
        for hops in 1..=MAX_HOPS {
            if matches!(r, Redirect::TryAgain | Redirect::Down) {
                let pause = match r {
                    Redirect::Down => down_pause(hops as u32 - 1),
                    _ => TRYAGAIN_PAUSE,
                };
                let since = self.multi.sent.unwrap_or_else(Instant::now);
                if r == Redirect::Down && since.elapsed() + pause > self.patience {
                    return Err(e);
                }
                // Nothing is outstanding during the pause: cut short, it is taken up again.
                lock(&self.multi.stages)[k] = Stage::Pausing(i, e.clone());
                if r == Redirect::Down {
                    self.reread(i).await;
                }
                tokio::time::sleep(pause).await;
            }
            let (to, ask) = hop(i, r);
            lock(&self.multi.stages)[k] = Stage::Following(to);
            let weight = self
                .pool
                .as_ref()
                .map_or(1, |(router, _)| router.weight(p.to - p.from));
            self.redirected(i, to, ask, weight).await?;
            i = to;
            let Some(c) = &mut self.conns[i] else {
                return Err(self.down(i, "not connected").await);
            };
            c.send_batch(&self.multi.keys[p.from..p.to]);
            lock(&self.multi.stages)[k] = Stage::Resent(i);
            (r, e) = match self.reply_at(k, p, i, hops < MAX_HOPS).await? {
                Ok(tally) => return Ok(tally),
                Err(next) => next,
            };
        }
        Err(e)
    }

    /// The reply of part `k`, sent again to server `i`: its tally, or when `follow` the
    /// redirect it asks for (counted) with its error; Err for any other error.
    async fn reply_at(
        &mut self,
        k: usize,
        p: Part,
        i: usize,
        follow: bool,
    ) -> Result<Result<Tally, (Redirect, LookupError)>, LookupError> {
        debug_assert!(matches!(lock(&self.multi.stages)[k], Stage::Resent(s) if s == i));
        let Some(c) = &mut self.conns[i] else {
            return Err(self.down(i, "not connected").await);
        };
        match c.recv_batch(&self.multi.keys[p.from..p.to]).await {
            Ok((_, tally)) => {
                let since = self.multi.sent.unwrap_or_else(Instant::now);
                self.took(i, since);
                Ok(Ok(tally))
            }
            Err(x) if x.fatal => {
                self.conns[i] = None;
                Err(self.down(i, &x.message).await)
            }
            Err(x) => match self.redirect_of(&x).filter(|_| follow) {
                Some(r) => Ok(Err((r, x))),
                None => Err(x),
            },
        }
    }
}
