CREATE TYPE role AS ENUM ('admin', 'member');
--> statement-breakpoint
CREATE TABLE users (
  id serial PRIMARY KEY,
  name text NOT NULL,
  email text UNIQUE,
  role role NOT NULL DEFAULT 'member',
  created_at timestamptz NOT NULL DEFAULT now()
);
