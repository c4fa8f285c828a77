//! After `prepare` loads ids `lo..=hi`, it removes the keys of ids outside them (rows a write
//! run inserted), so the database holds the data set and nothing more of it: a write run starts
//! from the same state every time. A Lua script walks one `SCAN` batch per call, so the server
//! is never held for long; keys whose suffix is not a number are not ours and stay.

use crate::error::SetupError;
use crate::proto::pipelined::StreamConn;
use crate::proto::redis::codec::RedisCodec;
use crate::proto::redis::login::{Answer, Login};

/// One SCAN batch: deletes the batch's `<head><digits><tail>` keys (the key format's text
/// around its id, ARGV[4] and ARGV[5]) outside `lo..=hi` (compared as numbers, or by length
/// past 15 significant digits) and returns "<next cursor> <deleted>".
const SCRIPT: &[u8] = br#"
local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[6], 'COUNT', 1000)
local lo, hi, n = tonumber(ARGV[2]), tonumber(ARGV[3]), 0
local head, tail = ARGV[4], ARGV[5]
for _, k in ipairs(r[2]) do
  local d = nil
  if #k > #head + #tail and k:sub(1, #head) == head and k:sub(#k - #tail + 1) == tail then
    d = k:sub(#head + 1, #k - #tail):match('^%d+$')
  end
  if d then d = d:gsub('^0+(%d)', '%1') end
  if d and (#d > 15 or tonumber(d) < lo or tonumber(d) > hi) then
    redis.call('DEL', k)
    n = n + 1
  end
end
return r[1] .. ' ' .. n
"#;

/// `s` matched literally in a SCAN pattern.
fn glob_escaped(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &b in s {
        if b"*?[]\\^".contains(&b) {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// Removes the keys outside `keys`; returns how many it removed.
pub async fn outside(
    login: &Login,
    conn: &mut StreamConn<RedisCodec>,
    keys: (u64, u64),
) -> Result<u64, SetupError> {
    let (lo, hi) = (keys.0.to_string(), keys.1.to_string());
    let (head, tail) = login.keys.around();
    let pattern = [glob_escaped(head), b"*".to_vec(), glob_escaped(tail)].concat();
    let mut cursor = b"0".to_vec();
    let mut removed = 0;
    loop {
        let args: [&[u8]; 9] = [
            b"EVAL",
            SCRIPT,
            b"0",
            &cursor,
            lo.as_bytes(),
            hi.as_bytes(),
            head,
            tail,
            &pattern,
        ];
        let answer = login
            .ask(conn, &args, "EVAL (removing keys outside the data set)")
            .await
            .map_err(|e| e.message)?;
        let Answer::Bulk(text) = answer else {
            return Err(SetupError(format!(
                "{}: removing keys outside the data set: the server answered {answer:?}",
                login.addr
            )));
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        let (next, n) = text
            .split_once(' ')
            .and_then(|(c, n)| Some((c.to_string(), n.parse::<u64>().ok()?)))
            .ok_or_else(|| format!("{}: unexpected script reply {text:?}", login.addr))?;
        removed += n;
        if next == "0" {
            return Ok(removed);
        }
        cursor = next.into_bytes();
    }
}
