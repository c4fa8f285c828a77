//! What a MySQL / MariaDB error code means to the run: the one mapping both drivers use.

use crate::outcome::ErrorKind;

/// The kind of a server error by its code; `Server` for every code that says nothing more.
pub fn kind(code: u16) -> ErrorKind {
    match code {
        // ER_DUP_ENTRY, ER_DUP_ENTRY_WITH_KEY_NAME: the key is there already.
        1062 | 1586 => ErrorKind::Duplicate,
        // ER_LOCK_DEADLOCK (InnoDB rolled the transaction back), ER_LOCK_WAIT_TIMEOUT.
        1213 | 1205 => ErrorKind::Deadlock,
        // ER_OPTION_PREVENTS_STATEMENT (--read-only), ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION,
        // ER_READ_ONLY_MODE.
        1290 | 1792 | 1836 => ErrorKind::Readonly,
        _ => ErrorKind::Server,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_by_kind() {
        assert_eq!(kind(1062), ErrorKind::Duplicate);
        assert_eq!(kind(1213), ErrorKind::Deadlock);
        assert_eq!(kind(1205), ErrorKind::Deadlock);
        for code in [1290, 1792, 1836] {
            assert_eq!(kind(code), ErrorKind::Readonly);
        }
        for code in [1146, 1064, 4025, 1317] {
            assert_eq!(kind(code), ErrorKind::Server);
        }
    }
}
