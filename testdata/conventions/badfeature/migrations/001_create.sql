CREATE TABLE {{table}} (id int);
