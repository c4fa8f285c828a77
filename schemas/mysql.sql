-- The usr table for MariaDB/MySQL (InnoDB), the same rows as PostgreSQL (see src/dataset.rs).
-- HandlerSocket reads this same table through its PRIMARY index.
DROP TABLE IF EXISTS usr;
CREATE TABLE usr (
    user_id    int UNSIGNED NOT NULL PRIMARY KEY,
    user_name  varchar(64) NOT NULL,
    user_email varchar(64) NOT NULL,
    created    datetime NOT NULL
) ENGINE=InnoDB;
