//! `?pipeline=` is from before `-p` pipelined HTTP: still accepted (and never sent), but `-p`
//! sets the depth, so a URL that forbids pipelining while `-p` asks for it is refused.

use crate::proto::target::SetupError;
use crate::url::TargetUrl;

pub fn check(url: &TargetUrl, depth: usize) -> Result<(), SetupError> {
    let label = url.redacted();
    match url.param("pipeline") {
        None | Some("1" | "true") => Ok(()),
        Some("0" | "false") if depth == 1 => Ok(()),
        Some(v @ ("0" | "false")) => Err(SetupError(format!(
            "pipeline={v} in {label} contradicts -p {depth}: -p sets the pipeline depth of \
             HTTP targets; drop ?pipeline= from the URL or use -p 1"
        ))),
        Some(other) => Err(SetupError(format!(
            "pipeline={other} in {label}: -p sets the pipeline depth of HTTP targets; drop \
             ?pipeline= from the URL"
        ))),
    }
}
