//! MariaDB's / MySQL's SQL multi-get (`--batch N`): one statement with N placeholders,
//! prepared once per connection; each request is one COM_STMT_EXECUTE binding the N keys
//! (`codec::encode_in`). The rows come in any order, one per distinct key found, each naming
//! its key in its first column.

/// The multi-get of `n` keys of the data set's table.
pub fn sql(n: usize) -> String {
    let marks = vec!["?"; n].join(", ");
    format!("SELECT user_id, user_name, user_email, created FROM usr WHERE user_id IN ({marks})")
}
