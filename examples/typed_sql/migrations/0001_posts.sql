CREATE TABLE posts (
  id serial PRIMARY KEY,
  author_id integer NOT NULL REFERENCES users (id),
  title text NOT NULL,
  tags text[] NOT NULL DEFAULT '{}',
  published_at timestamptz
);
