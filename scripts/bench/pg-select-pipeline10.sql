\set id1 random(1, 1000000)
\set id2 random(1, 1000000)
\set id3 random(1, 1000000)
\set id4 random(1, 1000000)
\set id5 random(1, 1000000)
\set id6 random(1, 1000000)
\set id7 random(1, 1000000)
\set id8 random(1, 1000000)
\set id9 random(1, 1000000)
\set id10 random(1, 1000000)
\startpipeline
SELECT user_name, user_email, created FROM usr WHERE user_id = :id1;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id2;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id3;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id4;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id5;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id6;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id7;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id8;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id9;
SELECT user_name, user_email, created FROM usr WHERE user_id = :id10;
\endpipeline
