\set id random(9000001, 10000000)
\set name random(100000000000000, 999999999999999)
UPDATE usr SET user_name = :name WHERE user_id = :id;
