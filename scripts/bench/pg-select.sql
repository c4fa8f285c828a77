\set id random(1, 1000000)
SELECT user_name, user_email, created FROM usr WHERE user_id = :id;
