-- Tollgate schema, version 1: accounts and keys, the credit ledger, rate limits and
-- concurrency leases. Every name is unqualified: the objects are created in the first
-- schema of the session's search_path, and found there by the store's statements.
--
-- Instants passed by the service (rate-limit and lease arithmetic) are Unix nanoseconds
-- in bigint columns, so that they compare exactly as the Go reference does; record times
-- (creation, rotation, revocation, periods) are timestamptz, with microsecond precision.
-- Nothing here reads the server's clock.

-- Accounts and keys ---------------------------------------------------------------------

CREATE TABLE tollgate_accounts (
    id           text        NOT NULL,
    plan         text        NOT NULL,
    restrictions jsonb,                    -- auth.Restrictions as JSON; NULL restricts nothing
    created_at   timestamptz NOT NULL,
    CONSTRAINT tollgate_accounts_pkey PRIMARY KEY (id)
);

CREATE TABLE tollgate_keys (
    seq          bigint      GENERATED ALWAYS AS IDENTITY,  -- creation order
    id           text        NOT NULL,
    account_id   text        NOT NULL,
    name         text        NOT NULL,
    is_primary   boolean     NOT NULL,
    hash         bytea       NOT NULL,     -- SHA-256 of the key's current value
    restrictions jsonb,
    created_at   timestamptz NOT NULL,
    rotated_at   timestamptz,
    revoked_at   timestamptz,
    CONSTRAINT tollgate_keys_pkey PRIMARY KEY (id),
    CONSTRAINT tollgate_keys_hash_key UNIQUE (hash),
    CONSTRAINT tollgate_keys_account_fkey FOREIGN KEY (account_id) REFERENCES tollgate_accounts (id),
    CONSTRAINT tollgate_keys_hash_length CHECK (length(hash) = 32)
);

CREATE INDEX tollgate_keys_by_account ON tollgate_keys (account_id, seq);

-- tollgate_key_state reports a key check (billing.KeyCheck): 0 live, 1 unknown (no key
-- with this id and hash in this account, or no such account), 2 revoked. An empty key id
-- is a session check: the account must exist.
CREATE FUNCTION tollgate_key_state(p_account text, p_key_id text, p_hash bytea) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE
    k record;
BEGIN
    IF coalesce(p_key_id, '') = '' THEN
        IF EXISTS (SELECT 1 FROM tollgate_accounts a WHERE a.id = p_account) THEN
            RETURN 0;
        END IF;
        RETURN 1;
    END IF;
    SELECT x.account_id, x.hash, x.revoked_at INTO k FROM tollgate_keys x WHERE x.id = p_key_id;
    IF NOT FOUND OR k.account_id <> p_account OR k.hash <> p_hash THEN
        RETURN 1;
    END IF;
    IF k.revoked_at IS NOT NULL THEN
        RETURN 2;
    END IF;
    RETURN 0;
END
$$;

-- The credit ledger ----------------------------------------------------------------------
--
-- An account's balance is split into one or more sub-balances (shards) so that a hot
-- account can take reservations in parallel. tollgate_balances holds what the shards
-- share: the allowance, the current period and the number of shards. Each shard holds
-- part of the remaining credits, part of the credits used in the period and part of the
-- per-API call counts; the account's figures are their sums. An account opened with one
-- shard (the default) is the classic single balance row.

CREATE TABLE tollgate_balances (
    account_id   text        NOT NULL,
    allowance    bigint      NOT NULL,
    period_start timestamptz NOT NULL,
    period_end   timestamptz NOT NULL,
    shards       int         NOT NULL,
    generation   int         NOT NULL DEFAULT 0,  -- bumped each time the shards are rebuilt
    CONSTRAINT tollgate_balances_pkey PRIMARY KEY (account_id),
    CONSTRAINT tollgate_balances_shards CHECK (shards BETWEEN 1 AND 1024)
);

CREATE TABLE tollgate_balance_shards (
    account_id   text        NOT NULL,
    shard        int         NOT NULL,       -- 0 .. shards-1
    generation   int         NOT NULL,
    period_start timestamptz NOT NULL,       -- always the account's period (renewed together)
    balance      bigint      NOT NULL,
    used         bigint      NOT NULL,
    usage        jsonb       NOT NULL DEFAULT '{}',  -- calls per API id in the period
    CONSTRAINT tollgate_balance_shards_pkey PRIMARY KEY (account_id, shard),
    CONSTRAINT tollgate_balance_nonnegative CHECK (balance >= 0)
);

-- tollgate_ledger is append-only: one entry per change of a balance. The amount is the
-- signed change of the balance ('open' and 'renewal' give the new balance). A request id
-- is one namespace for reservations and adjustments, and a reservation is settled at
-- most once: the two partial unique indexes make replays change nothing. A 'void'
-- closes a request id that a settlement found no reservation for (the undoing of an
-- admission whose answer was lost, which may still be on its way): a reservation with
-- that id arriving later is a replay and takes nothing.
CREATE TABLE tollgate_ledger (
    seq          bigint      GENERATED ALWAYS AS IDENTITY,  -- order of entries (not indexed:
                                                          -- a rising key is a hot spot)
    account_id   text        NOT NULL,
    request_id   uuid,                       -- NULL for 'open' and 'renewal'
    kind         text        NOT NULL,
    amount       bigint      NOT NULL,
    period_start timestamptz NOT NULL,       -- the period the change applies to
    shard        int,                        -- 'reserve': the shard that counted the call
    generation   int,                        -- 'reserve': the shards' generation then
    apis         text[],                     -- 'reserve': APIs counted; 'settle'/'refund': uncounted
    reason       text,                       -- 'adjust': the operator's reason
    CONSTRAINT tollgate_ledger_kind CHECK (kind IN ('open', 'renewal', 'reserve', 'settle', 'refund', 'adjust', 'void'))
);

CREATE UNIQUE INDEX tollgate_ledger_request ON tollgate_ledger (account_id, request_id)
    WHERE kind IN ('reserve', 'adjust', 'void');
CREATE UNIQUE INDEX tollgate_ledger_settlement ON tollgate_ledger (account_id, request_id)
    WHERE kind IN ('settle', 'refund');

-- tollgate_usage_add adds delta to the count of each API listed (once per listing), never
-- going below zero. (The helpers are PL/pgSQL, not SQL, functions: their plans are
-- cached for the session instead of being planned at every call.)
CREATE FUNCTION tollgate_usage_add(p_usage jsonb, p_apis text[], p_delta bigint) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    u jsonb := p_usage;
    api text;
BEGIN
    IF p_apis IS NULL THEN
        RETURN u;
    END IF;
    FOREACH api IN ARRAY p_apis LOOP
        u := jsonb_set(u, ARRAY[api], to_jsonb(greatest(coalesce((u ->> api)::bigint, 0) + p_delta, 0)));
    END LOOP;
    RETURN u;
END
$$;

-- tollgate_sums returns the remaining and used credits of an account: the sums over its
-- shards, as of the statement's snapshot (plus the caller's own changes).
CREATE FUNCTION tollgate_sums(p_account text, OUT o_remaining bigint, OUT o_used bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT coalesce(sum(s.balance), 0)::bigint, coalesce(sum(s.used), 0)::bigint INTO o_remaining, o_used
      FROM tollgate_balance_shards s WHERE s.account_id = p_account;
END
$$;

-- tollgate_renew returns the account's balance row, after renewing it if p_start is
-- later than its period: every shard is reset (the allowance split between them, nothing
-- used, no calls counted) together with the row, under the row's lock, so that one
-- renewal happens however many callers reach the new period at once. An earlier p_start
-- never moves the period back. It returns a row of NULLs if the account has no balance.
CREATE FUNCTION tollgate_renew(p_account text, p_start timestamptz, p_end timestamptz, p_allowance bigint)
RETURNS tollgate_balances
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
BEGIN
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account;
    IF NOT FOUND OR p_start <= m.period_start THEN
        RETURN m;
    END IF;
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
    IF p_start <= m.period_start THEN
        RETURN m; -- renewed by another caller meanwhile
    END IF;
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    UPDATE tollgate_balance_shards s
       SET balance = p_allowance / m.shards + CASE WHEN s.shard < p_allowance % m.shards THEN 1 ELSE 0 END,
           used = 0, usage = '{}', period_start = p_start
     WHERE s.account_id = p_account;
    UPDATE tollgate_balances b
       SET allowance = p_allowance, period_start = p_start, period_end = p_end
     WHERE b.account_id = p_account
    RETURNING * INTO m;
    INSERT INTO tollgate_ledger (account_id, kind, amount, period_start)
    VALUES (p_account, 'renewal', p_allowance, p_start);
    RETURN m;
END
$$;

-- tollgate_take takes p_amount credits from one shard of the account, adds p_used to its
-- used credits and counts the APIs there. It reports whether it could, the shard, its
-- generation and period, and the account's remaining and used credits afterwards (or,
-- when the credits are short, as they were).
--
-- With several shards it first tries a shard that covers the amount and that no other
-- transaction holds (SKIP LOCKED, starting from a random shard); then waits for one that
-- covers it (in a subtransaction, see below). When no single shard covers the amount, the total decides: if it is short,
-- the answer is "insufficient" without taking any lock; otherwise every shard is locked,
-- in order, the total is checked again, and the credits are spread evenly over the
-- shards minus the amount taken. So a reservation is refused only when the account's
-- total is short, and the total is always exact.
CREATE FUNCTION tollgate_take(p_account text, p_shards int, p_amount bigint, p_used bigint, p_apis text[],
    OUT o_ok boolean, OUT o_shard int, OUT o_generation int, OUT o_period_start timestamptz,
    OUT o_remaining bigint, OUT o_used bigint)
LANGUAGE plpgsql AS $$
DECLARE
    r int := 0;
    n int;
    total bigint;
    spent bigint;
    rest bigint;
BEGIN
    o_ok := false;
    IF p_shards > 1 THEN
        r := floor(random() * p_shards)::int;
        -- A row lock taken for a re-check that fails (the shard was drained meanwhile) is
        -- kept until the transaction ends, out of shard order. Each attempt is a
        -- subtransaction, rolled back when it takes nothing, which releases such a lock:
        -- so no attempt waits while holding a stray lock, and the pooling below locks
        -- the shards in order and never deadlocks.
        BEGIN
            UPDATE tollgate_balance_shards s
               SET balance = s.balance - p_amount, used = s.used + p_used, usage = tollgate_usage_add(s.usage, p_apis, 1)
             WHERE s.account_id = p_account AND s.shard = (
                   SELECT x.shard FROM tollgate_balance_shards x
                    WHERE x.account_id = p_account AND x.balance >= p_amount
                    ORDER BY (x.shard + p_shards - r) % p_shards
                    LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING s.shard, s.generation, s.period_start INTO o_shard, o_generation, o_period_start;
            IF NOT FOUND THEN
                RAISE SQLSTATE 'TG001';
            END IF;
        EXCEPTION WHEN SQLSTATE 'TG001' THEN
            o_shard := NULL;
        END;
        IF o_shard IS NULL THEN
            -- Every shard that covers the amount is busy: wait for one.
            BEGIN
                UPDATE tollgate_balance_shards s
                   SET balance = s.balance - p_amount, used = s.used + p_used, usage = tollgate_usage_add(s.usage, p_apis, 1)
                 WHERE s.account_id = p_account AND s.balance >= p_amount AND s.shard = (
                       SELECT x.shard FROM tollgate_balance_shards x
                        WHERE x.account_id = p_account AND x.balance >= p_amount
                        ORDER BY (x.shard + p_shards - r) % p_shards
                        LIMIT 1)
                RETURNING s.shard, s.generation, s.period_start INTO o_shard, o_generation, o_period_start;
                IF NOT FOUND THEN
                    RAISE SQLSTATE 'TG001';
                END IF;
            EXCEPTION WHEN SQLSTATE 'TG001' THEN
                o_shard := NULL;
            END;
        END IF;
        IF o_shard IS NOT NULL THEN
            o_ok := true;
            SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
            RETURN;
        END IF;
    ELSE
        UPDATE tollgate_balance_shards s
           SET balance = s.balance - p_amount, used = s.used + p_used, usage = tollgate_usage_add(s.usage, p_apis, 1)
         WHERE s.account_id = p_account AND s.shard = 0 AND s.balance >= p_amount
        RETURNING s.shard, s.generation, s.period_start, s.balance, s.used
             INTO o_shard, o_generation, o_period_start, o_remaining, o_used;
        IF FOUND THEN
            o_ok := true;
            RETURN;
        END IF;
    END IF;

    -- No single shard covers the amount. A short total refuses at once.
    SELECT t.o_remaining, t.o_used INTO total, spent FROM tollgate_sums(p_account) t;
    IF total < p_amount THEN
        o_remaining := total;
        o_used := spent;
        RETURN;
    END IF;
    -- The total may cover it: lock every shard, decide on the exact total, and pool the
    -- credits.
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    SELECT count(*)::int, coalesce(sum(s.balance), 0)::bigint, coalesce(sum(s.used), 0)::bigint
      INTO n, total, spent
      FROM tollgate_balance_shards s WHERE s.account_id = p_account;
    IF n = 0 OR total < p_amount THEN
        o_remaining := total;
        o_used := spent;
        RETURN;
    END IF;
    r := r % n;
    rest := total - p_amount;
    UPDATE tollgate_balance_shards s
       SET balance = rest / n + CASE WHEN s.shard < rest % n THEN 1 ELSE 0 END,
           used = s.used + CASE WHEN s.shard = r THEN p_used ELSE 0 END,
           usage = CASE WHEN s.shard = r THEN tollgate_usage_add(s.usage, p_apis, 1) ELSE s.usage END
     WHERE s.account_id = p_account;
    SELECT s.generation, s.period_start INTO o_generation, o_period_start
      FROM tollgate_balance_shards s WHERE s.account_id = p_account AND s.shard = r;
    o_ok := true;
    o_shard := r;
    o_remaining := rest;
    o_used := spent + p_used;
END
$$;

-- tollgate_charge makes a reservation: it takes the credits (tollgate_take) and records
-- the 'reserve' entry. If a concurrent reservation with the same request id recorded its
-- entry first, it gives the credits back and reports a replay. Outcomes: 0 reserved,
-- 1 insufficient, 2 replayed.
CREATE FUNCTION tollgate_charge(p_account text, p_shards int, p_request uuid, p_amount bigint, p_apis text[],
    OUT o_outcome int, OUT o_remaining bigint, OUT o_used bigint, OUT o_period_start timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    tk record;
BEGIN
    tk := tollgate_take(p_account, p_shards, p_amount, p_amount, p_apis);
    o_remaining := tk.o_remaining;
    o_used := tk.o_used;
    o_period_start := tk.o_period_start;
    IF NOT tk.o_ok THEN
        o_outcome := 1;
        RETURN;
    END IF;
    INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, shard, generation, apis)
    VALUES (p_account, p_request, 'reserve', -p_amount, tk.o_period_start, tk.o_shard, tk.o_generation, p_apis)
    ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
    IF FOUND THEN
        o_outcome := 0;
        RETURN;
    END IF;
    UPDATE tollgate_balance_shards s
       SET balance = s.balance + p_amount, used = s.used - p_amount, usage = tollgate_usage_add(s.usage, p_apis, -1)
     WHERE s.account_id = p_account AND s.shard = tk.o_shard;
    o_remaining := o_remaining + p_amount;
    o_used := o_used - p_amount;
    o_outcome := 2;
END
$$;

-- tollgate_open creates an account's balance with p_shards shards.
CREATE FUNCTION tollgate_open(p_account text, p_balance bigint, p_allowance bigint,
    p_start timestamptz, p_end timestamptz, p_shards int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tollgate_balances (account_id, allowance, period_start, period_end, shards)
    VALUES (p_account, p_allowance, p_start, p_end, p_shards);
    INSERT INTO tollgate_balance_shards (account_id, shard, generation, period_start, balance, used)
    SELECT p_account, g, 0, p_start, p_balance / p_shards + CASE WHEN g < p_balance % p_shards THEN 1 ELSE 0 END, 0
      FROM generate_series(0, p_shards - 1) AS g;
    INSERT INTO tollgate_ledger (account_id, kind, amount, period_start)
    VALUES (p_account, 'open', p_balance, p_start);
END
$$;

-- tollgate_reserve is billing.Ledger.Reserve. Status: 0 reserved (or a replay, which
-- changes nothing), 1 no balance, 4 insufficient credits.
CREATE FUNCTION tollgate_reserve(p_account text, p_request uuid, p_amount bigint, p_apis text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    c record;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    IF EXISTS (SELECT 1 FROM tollgate_ledger e
                WHERE e.account_id = p_account AND e.request_id = p_request AND e.kind IN ('reserve', 'adjust', 'void')) THEN
        SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
        RETURN;
    END IF;
    c := tollgate_charge(p_account, m.shards, p_request, p_amount, p_apis);
    o_remaining := c.o_remaining;
    o_used := c.o_used;
    IF c.o_outcome = 1 THEN
        o_status := 4;
    ELSIF c.o_period_start <> m.period_start THEN
        -- A renewal committed between the period check and the reservation.
        SELECT b.allowance, b.period_start, b.period_end INTO o_allowance, o_period_start, o_period_end
          FROM tollgate_balances b WHERE b.account_id = p_account;
    END IF;
END
$$;

-- tollgate_settle is billing.Ledger.Settle. Status: 0 settled (or settled before), 1 no
-- balance, 2 no such reservation (the request id is then voided), 3 refund outside
-- 0..reserved (o_reserved says the reserved amount). A refund of a reservation made in an earlier period is not credited
-- and its APIs are not uncounted. The settlement entry is recorded first, so concurrent
-- settlements of one reservation wait for each other and only the first has an effect.
CREATE FUNCTION tollgate_settle(p_account text, p_request uuid, p_refund bigint, p_uncount text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz, OUT o_reserved bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    e tollgate_ledger;
    known boolean;
    credit boolean;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    SELECT * INTO e FROM tollgate_ledger l
     WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'reserve';
    known := FOUND;
    IF NOT known THEN
        -- Close the request id, so that a reservation still on its way takes nothing;
        -- if one committed meanwhile (the insert then conflicts), settle it.
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start)
        VALUES (p_account, p_request, 'void', 0, m.period_start)
        ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
        IF NOT FOUND THEN
            SELECT * INTO e FROM tollgate_ledger l
             WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind = 'reserve';
            known := FOUND;
        END IF;
    END IF;
    IF NOT known THEN
        o_status := 2;
    ELSIF p_refund < 0 OR p_refund > -e.amount THEN
        o_status := 3;
        o_reserved := -e.amount;
    ELSE
        credit := e.period_start = m.period_start AND (p_refund > 0 OR coalesce(cardinality(p_uncount), 0) > 0);
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, apis)
        VALUES (p_account, p_request, CASE WHEN credit AND p_refund > 0 THEN 'refund' ELSE 'settle' END,
                CASE WHEN credit THEN p_refund ELSE 0 END, m.period_start, CASE WHEN credit THEN p_uncount END)
        ON CONFLICT (account_id, request_id) WHERE kind IN ('settle', 'refund') DO NOTHING;
        IF FOUND AND credit THEN
            -- Give back on the shard that counted the call (all counts are on shard 0
            -- after the shards were rebuilt), unless a renewal has reset it meanwhile.
            UPDATE tollgate_balance_shards s
               SET balance = s.balance + p_refund, used = s.used - p_refund,
                   usage = tollgate_usage_add(s.usage, p_uncount, -1)
             WHERE s.account_id = p_account
               AND s.shard = CASE WHEN s.generation = e.generation THEN e.shard ELSE 0 END
               AND s.period_start = e.period_start;
            IF NOT FOUND THEN
                UPDATE tollgate_ledger l SET kind = 'settle', amount = 0, apis = NULL
                 WHERE l.account_id = p_account AND l.request_id = p_request AND l.kind IN ('settle', 'refund');
            END IF;
        END IF;
    END IF;
    SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
END
$$;

-- tollgate_adjust is billing.Ledger.Adjust. Status: 0 adjusted (or a replay), 1 no
-- balance, 4 insufficient credits.
CREATE FUNCTION tollgate_adjust(p_account text, p_request uuid, p_amount bigint, p_reason text,
    p_start timestamptz, p_end timestamptz, p_allowance bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    tk record;
    target int;
    ps timestamptz;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    IF NOT EXISTS (SELECT 1 FROM tollgate_ledger e
                    WHERE e.account_id = p_account AND e.request_id = p_request AND e.kind IN ('reserve', 'adjust', 'void')) THEN
        IF p_amount >= 0 THEN
            target := floor(random() * m.shards)::int;
            UPDATE tollgate_balance_shards s SET balance = s.balance + p_amount
             WHERE s.account_id = p_account AND s.shard = target
            RETURNING s.period_start INTO ps;
            IF NOT FOUND THEN -- the shards were rebuilt meanwhile: shard 0 always exists
                target := 0;
                UPDATE tollgate_balance_shards s SET balance = s.balance + p_amount
                 WHERE s.account_id = p_account AND s.shard = 0
                RETURNING s.period_start INTO ps;
            END IF;
        ELSE
            tk := tollgate_take(p_account, m.shards, -p_amount, 0, NULL);
            IF NOT tk.o_ok THEN
                o_status := 4;
                o_remaining := tk.o_remaining;
                o_used := tk.o_used;
                RETURN;
            END IF;
            target := tk.o_shard;
            ps := tk.o_period_start;
        END IF;
        INSERT INTO tollgate_ledger (account_id, request_id, kind, amount, period_start, reason)
        VALUES (p_account, p_request, 'adjust', p_amount, ps, p_reason)
        ON CONFLICT (account_id, request_id) WHERE kind IN ('reserve', 'adjust', 'void') DO NOTHING;
        IF NOT FOUND THEN -- a concurrent replay recorded it first: undo
            UPDATE tollgate_balance_shards s SET balance = s.balance - p_amount
             WHERE s.account_id = p_account AND s.shard = target;
        END IF;
    END IF;
    SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
END
$$;

-- tollgate_balance is billing.Ledger.Balance. Status: 0 found, 1 no balance.
CREATE FUNCTION tollgate_balance(p_account text, p_start timestamptz, p_end timestamptz, p_allowance bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
BEGIN
    m := tollgate_renew(p_account, p_start, p_end, p_allowance);
    IF m.account_id IS NULL THEN
        o_status := 1;
        RETURN;
    END IF;
    o_status := 0;
    o_allowance := m.allowance;
    o_period_start := m.period_start;
    o_period_end := m.period_end;
    SELECT t.o_remaining, t.o_used INTO o_remaining, o_used FROM tollgate_sums(p_account) t;
END
$$;

-- tollgate_set_shards rebuilds an account's shards as p_shards shards: the remaining
-- credits are spread evenly, the used credits and call counts gathered on shard 0 (where
-- settlements of reservations made before then give back). Returns false if the account
-- has no balance.
CREATE FUNCTION tollgate_set_shards(p_account text, p_shards int) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    m tollgate_balances;
    total bigint;
    spent bigint;
    calls jsonb;
BEGIN
    SELECT * INTO m FROM tollgate_balances b WHERE b.account_id = p_account FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_account ORDER BY s.shard FOR UPDATE;
    SELECT t.o_remaining, t.o_used INTO total, spent FROM tollgate_sums(p_account) t;
    SELECT coalesce(jsonb_object_agg(x.api, x.n), '{}') INTO calls
      FROM (SELECT u.key AS api, sum(u.value::bigint) AS n
              FROM tollgate_balance_shards s, jsonb_each_text(s.usage) u
             WHERE s.account_id = p_account GROUP BY u.key) x;
    DELETE FROM tollgate_balance_shards s WHERE s.account_id = p_account;
    INSERT INTO tollgate_balance_shards (account_id, shard, generation, period_start, balance, used, usage)
    SELECT p_account, g, m.generation + 1, m.period_start,
           total / p_shards + CASE WHEN g < total % p_shards THEN 1 ELSE 0 END,
           CASE WHEN g = 0 THEN spent ELSE 0 END,
           CASE WHEN g = 0 THEN calls ELSE '{}' END
      FROM generate_series(0, p_shards - 1) AS g;
    UPDATE tollgate_balances b SET shards = p_shards, generation = m.generation + 1 WHERE b.account_id = p_account;
    RETURN true;
END
$$;

-- Rate limits ----------------------------------------------------------------------------
--
-- One GCRA timestamp (theoretical arrival time, Unix nanoseconds) per key; a key never
-- seen has tat 0. The decision arithmetic is billing.GCRA's: with emission interval e and
-- window e*burst, an event at now is allowed iff max(tat, now) + e - now <= window.

CREATE TABLE tollgate_rate_limits (
    key text   NOT NULL,
    tat bigint NOT NULL,
    CONSTRAINT tollgate_rate_limits_pkey PRIMARY KEY (key)
);

-- tollgate_rate_lock locks the key's row, creating it (tat 0) if needed, and returns tat.
CREATE FUNCTION tollgate_rate_lock(p_key text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    t bigint;
BEGIN
    SELECT r.tat INTO t FROM tollgate_rate_limits r WHERE r.key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO tollgate_rate_limits (key, tat) VALUES (p_key, 0) ON CONFLICT (key) DO NOTHING;
        SELECT r.tat INTO t FROM tollgate_rate_limits r WHERE r.key = p_key FOR UPDATE;
    END IF;
    RETURN t;
END
$$;

-- tollgate_rate_allow is billing.RateLimiter.Allow: it returns the tat the decision was
-- made on, and records the event if it is allowed. An event that the latest committed
-- tat already refuses is refused without a lock (tat only grows, so the refusal stands).
CREATE FUNCTION tollgate_rate_allow(p_key text, p_now bigint, p_e bigint, p_window bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    t bigint;
BEGIN
    SELECT r.tat INTO t FROM tollgate_rate_limits r WHERE r.key = p_key;
    IF FOUND AND greatest(t, p_now) + p_e - p_now > p_window THEN
        RETURN t;
    END IF;
    t := tollgate_rate_lock(p_key);
    IF greatest(t, p_now) + p_e - p_now <= p_window THEN
        UPDATE tollgate_rate_limits r SET tat = greatest(t, p_now) + p_e WHERE r.key = p_key;
    END IF;
    RETURN t;
END
$$;

-- Concurrency leases ---------------------------------------------------------------------
--
-- One row per slot holder; a lease is live while expires > now (Unix nanoseconds).
-- Granting a slot counts the live leases under a transaction-level advisory lock per key
-- (class 1953261427, 'tlgs'), so that two sessions cannot both pass the ceiling; a key
-- that is already full is refused without the lock.

CREATE TABLE tollgate_leases (
    key     text   NOT NULL,
    holder  uuid   NOT NULL,
    expires bigint NOT NULL,
    CONSTRAINT tollgate_leases_pkey PRIMARY KEY (key, holder)
);

-- tollgate_slot_count returns the live leases of a key at p_now, and whether p_holder has
-- one.
CREATE FUNCTION tollgate_slot_count(p_key text, p_holder uuid, p_now bigint, OUT o_in_use int, OUT o_held boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT count(*) FILTER (WHERE l.expires > p_now)::int,
           coalesce(bool_or(l.holder = p_holder AND l.expires > p_now), false)
      INTO o_in_use, o_held
      FROM tollgate_leases l WHERE l.key = p_key;
END
$$;

-- tollgate_slot_lock takes the key's advisory lock and returns the count as of then.
CREATE FUNCTION tollgate_slot_lock(p_key text, p_holder uuid, p_now bigint, OUT o_in_use int, OUT o_held boolean)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1953261427, hashtext(p_key));
    SELECT c.o_in_use, c.o_held INTO o_in_use, o_held FROM tollgate_slot_count(p_key, p_holder, p_now) c;
END
$$;

-- tollgate_slot_grant records p_holder's lease and forgets the key's ended leases (those
-- that no other transaction is deleting or renewing at the moment).
CREATE FUNCTION tollgate_slot_grant(p_key text, p_holder uuid, p_expires bigint, p_now bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tollgate_leases (key, holder, expires) VALUES (p_key, p_holder, p_expires)
    ON CONFLICT (key, holder) DO UPDATE SET expires = EXCLUDED.expires;
    DELETE FROM tollgate_leases l
     WHERE l.ctid = ANY (ARRAY(SELECT x.ctid FROM tollgate_leases x
                                WHERE x.key = p_key AND x.expires <= p_now FOR UPDATE SKIP LOCKED));
END
$$;

-- tollgate_slot_acquire is billing.ConcurrencyLimiter.Acquire.
CREATE FUNCTION tollgate_slot_acquire(p_key text, p_holder uuid, p_ceiling int, p_lease bigint, p_now bigint,
    OUT o_acquired boolean, OUT o_in_use int)
LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    c := tollgate_slot_count(p_key, p_holder, p_now);
    IF NOT c.o_held AND c.o_in_use >= p_ceiling THEN
        o_acquired := false;
        o_in_use := c.o_in_use;
        RETURN;
    END IF;
    c := tollgate_slot_lock(p_key, p_holder, p_now);
    IF NOT c.o_held AND c.o_in_use >= p_ceiling THEN
        o_acquired := false;
        o_in_use := c.o_in_use;
        RETURN;
    END IF;
    PERFORM tollgate_slot_grant(p_key, p_holder, p_now + p_lease, p_now);
    o_acquired := true;
    o_in_use := c.o_in_use + CASE WHEN c.o_held THEN 0 ELSE 1 END;
END
$$;

-- One-step admission and closing ---------------------------------------------------------

-- tollgate_admit performs the parts of billing.Step in one transaction, in the order key,
-- rate, slot, credits. Every part is checked before anything is written, and credits
-- (the only check that writes) come last, so a denied step changes nothing. Locks are
-- taken in the order rate row, slot lock, balance row, shards, as every other function
-- does, so that admissions never deadlock with each other or with settlements. A NULL
-- group of parameters is a part the step does not have:
--   key:     p_key_account (NULL: no key check), p_key_id, p_key_hash
--   rate:    p_rate_e (NULL: no rate limit), p_rate_window, for the key p_account
--   slot:    p_slot_ceiling (NULL: no slot), p_slot_lease, held by p_request under p_account
--   credits: p_credit_account (NULL: no reservation), p_amount, p_apis, the period and
--            allowance
-- o_denied is a billing.Denial. o_status is 1 when the credit account has no balance (an
-- error, nothing changed). A step whose request already has a reservation (or a void, or,
-- without credits, a live lease) is a replay: it is admitted again and takes nothing;
-- the holder's live lease is renewed. o_rate_tat is the tat the rate decision was made on (for a
-- replay, the current one).
CREATE FUNCTION tollgate_admit(
    p_account text, p_request uuid, p_now bigint,
    p_key_account text, p_key_id text, p_key_hash bytea,
    p_rate_e bigint, p_rate_window bigint,
    p_slot_ceiling int, p_slot_lease bigint,
    p_credit_account text, p_amount bigint, p_apis text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint,
    OUT o_denied int, OUT o_status int, OUT o_key_state int, OUT o_rate_tat bigint,
    OUT o_slot_acquired boolean, OUT o_slot_in_use int,
    OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    replay boolean := false;
    t bigint;
    sc record;
    m tollgate_balances;
    c record;
BEGIN
    o_denied := 0;
    o_status := 0;

    -- Key: the key with this id still has this hash and is not revoked, in the step's
    -- account (a check naming another account is unknown).
    IF p_key_account IS NOT NULL THEN
        o_key_state := CASE WHEN p_key_account = p_account
                            THEN tollgate_key_state(p_key_account, p_key_id, p_key_hash) ELSE 1 END;
        IF o_key_state <> 0 THEN
            o_denied := 1;
            RETURN;
        END IF;
    END IF;

    IF p_credit_account IS NOT NULL THEN
        replay := EXISTS (SELECT 1 FROM tollgate_ledger e
                           WHERE e.account_id = p_credit_account AND e.request_id = p_request
                             AND e.kind IN ('reserve', 'adjust', 'void'));
    ELSIF p_slot_ceiling IS NOT NULL THEN
        replay := EXISTS (SELECT 1 FROM tollgate_leases l
                           WHERE l.key = p_account AND l.holder = p_request AND l.expires > p_now);
    END IF;

    IF NOT replay THEN
        -- Rate: refused at once if the committed tat refuses; else decided under the row lock.
        IF p_rate_e IS NOT NULL THEN
            SELECT r.tat INTO t FROM tollgate_rate_limits r WHERE r.key = p_account;
            IF NOT FOUND OR greatest(t, p_now) + p_rate_e - p_now <= p_rate_window THEN
                t := tollgate_rate_lock(p_account);
            END IF;
            o_rate_tat := t;
            IF greatest(t, p_now) + p_rate_e - p_now > p_rate_window THEN
                o_denied := 2;
                RETURN;
            END IF;
        END IF;

        -- Slot: refused at once if the key is full; else counted under the advisory lock.
        IF p_slot_ceiling IS NOT NULL THEN
            sc := tollgate_slot_count(p_account, p_request, p_now);
            IF sc.o_held OR sc.o_in_use < p_slot_ceiling THEN
                sc := tollgate_slot_lock(p_account, p_request, p_now);
            END IF;
            o_slot_in_use := sc.o_in_use;
            o_slot_acquired := false;
            IF NOT sc.o_held AND sc.o_in_use >= p_slot_ceiling THEN
                o_denied := 3;
                RETURN;
            END IF;
        END IF;
    END IF;

    IF p_credit_account IS NOT NULL THEN
        m := tollgate_renew(p_credit_account, p_start, p_end, p_allowance);
        IF m.account_id IS NULL THEN
            o_status := 1;
            RETURN;
        END IF;
        o_allowance := m.allowance;
        o_period_start := m.period_start;
        o_period_end := m.period_end;
        IF NOT replay THEN
            -- Credits: the reservation, the last check and the first write.
            c := tollgate_charge(p_credit_account, m.shards, p_request, p_amount, p_apis);
            o_remaining := c.o_remaining;
            o_used := c.o_used;
            IF c.o_outcome = 1 THEN
                o_denied := 4;
                RETURN;
            END IF;
            IF c.o_period_start <> m.period_start THEN
                -- A renewal committed between the period check and the reservation.
                SELECT b.allowance, b.period_start, b.period_end INTO o_allowance, o_period_start, o_period_end
                  FROM tollgate_balances b WHERE b.account_id = p_credit_account;
            END IF;
            replay := c.o_outcome = 2;
        END IF;
    END IF;

    IF replay THEN
        IF p_rate_e IS NOT NULL THEN
            SELECT coalesce((SELECT r.tat FROM tollgate_rate_limits r WHERE r.key = p_account), 0) INTO o_rate_tat;
        END IF;
        IF p_slot_ceiling IS NOT NULL THEN
            UPDATE tollgate_leases l SET expires = p_now + p_slot_lease
             WHERE l.key = p_account AND l.holder = p_request AND l.expires > p_now;
            o_slot_acquired := FOUND;
            SELECT sc2.o_in_use INTO o_slot_in_use FROM tollgate_slot_count(p_account, p_request, p_now) sc2;
        END IF;
        IF p_credit_account IS NOT NULL THEN
            SELECT t2.o_remaining, t2.o_used INTO o_remaining, o_used FROM tollgate_sums(p_credit_account) t2;
        END IF;
        RETURN;
    END IF;

    -- Every part passed: record the rate event and the lease.
    IF p_rate_e IS NOT NULL THEN
        UPDATE tollgate_rate_limits r SET tat = greatest(t, p_now) + p_rate_e WHERE r.key = p_account;
    END IF;
    IF p_slot_ceiling IS NOT NULL THEN
        PERFORM tollgate_slot_grant(p_account, p_request, p_now + p_slot_lease, p_now);
        o_slot_acquired := true;
        o_slot_in_use := sc.o_in_use + CASE WHEN sc.o_held THEN 0 ELSE 1 END;
    END IF;
END
$$;

-- tollgate_close settles p_request's reservation (when p_settle_account is not NULL) and
-- frees its slot of p_account (when p_release), in one transaction. The slot is freed
-- last (after any shard lock, as admissions take them) and even if the settlement
-- reports an error status (see tollgate_settle).
CREATE FUNCTION tollgate_close(p_account text, p_request uuid, p_release boolean,
    p_settle_account text, p_refund bigint, p_uncount text[],
    p_start timestamptz, p_end timestamptz, p_allowance bigint,
    OUT o_status int, OUT o_remaining bigint, OUT o_used bigint, OUT o_allowance bigint,
    OUT o_period_start timestamptz, OUT o_period_end timestamptz, OUT o_reserved bigint)
LANGUAGE plpgsql AS $$
BEGIN
    o_status := 0;
    IF p_settle_account IS NOT NULL THEN
        SELECT * INTO o_status, o_remaining, o_used, o_allowance, o_period_start, o_period_end, o_reserved
          FROM tollgate_settle(p_settle_account, p_request, p_refund, p_uncount, p_start, p_end, p_allowance);
    END IF;
    IF p_release THEN
        DELETE FROM tollgate_leases l WHERE l.key = p_account AND l.holder = p_request;
    END IF;
END
$$;

-- Batches ----------------------------------------------------------------------------------
--
-- A batch is several admission steps (or closings) of one account, sent together by one
-- instance (Options.Batch): they run one after the other in one transaction, as they
-- would one call each, and commit together, so that a hot account pays one round trip,
-- one commit and one wait for the WAL flush per batch instead of per call. Arrays hold
-- one element per step; the APIs of all steps are one flat array, p_api_counts[i] of
-- them belonging to step i. Rows come back in the order of the steps.
--
-- A batch takes the account's locks up front, in the order single calls take them
-- (rate row, slot lock, balance row, shards in order), and renews the balance first
-- for the latest period among its steps (the steps are concurrent calls: any order is
-- theirs). Its steps then find every lock they need already held, so a batch never
-- waits for a lock while holding one that another transaction needs first.

CREATE FUNCTION tollgate_admit_batch(
    p_account text, p_request uuid[], p_now bigint[],
    p_key_account text[], p_key_id text[], p_key_hash bytea[],
    p_rate_e bigint[], p_rate_window bigint[],
    p_slot_ceiling int[], p_slot_lease bigint[],
    p_credit_account text[], p_amount bigint[], p_apis text[], p_api_counts int[],
    p_start timestamptz[], p_end timestamptz[], p_allowance bigint[])
RETURNS TABLE (o_denied int, o_status int, o_key_state int, o_rate_tat bigint,
    o_slot_acquired boolean, o_slot_in_use int,
    o_remaining bigint, o_used bigint, o_allowance bigint,
    o_period_start timestamptz, o_period_end timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    off int := 0;
    a record;
    last int;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_rate_e) x WHERE x IS NOT NULL) THEN
        PERFORM tollgate_rate_lock(p_account);
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_slot_ceiling) x WHERE x IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock(1953261427, hashtext(p_account));
    END IF;
    SELECT i INTO last FROM generate_subscripts(p_credit_account, 1) AS i
     WHERE p_credit_account[i] IS NOT NULL ORDER BY p_start[i] DESC LIMIT 1;
    IF last IS NOT NULL THEN
        PERFORM tollgate_renew(p_credit_account[last], p_start[last], p_end[last], p_allowance[last]);
        PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_credit_account[last] ORDER BY s.shard FOR UPDATE;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(p_request), 0) LOOP
        a := tollgate_admit(p_account, p_request[i], p_now[i],
            p_key_account[i], p_key_id[i], p_key_hash[i],
            p_rate_e[i], p_rate_window[i],
            p_slot_ceiling[i], p_slot_lease[i],
            p_credit_account[i], p_amount[i], p_apis[off + 1 : off + p_api_counts[i]],
            p_start[i], p_end[i], p_allowance[i]);
        off := off + p_api_counts[i];
        o_denied := a.o_denied;
        o_status := a.o_status;
        o_key_state := a.o_key_state;
        o_rate_tat := a.o_rate_tat;
        o_slot_acquired := a.o_slot_acquired;
        o_slot_in_use := a.o_slot_in_use;
        o_remaining := a.o_remaining;
        o_used := a.o_used;
        o_allowance := a.o_allowance;
        o_period_start := a.o_period_start;
        o_period_end := a.o_period_end;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE FUNCTION tollgate_close_batch(
    p_account text, p_request uuid[], p_release boolean[],
    p_settle_account text[], p_refund bigint[], p_uncount text[], p_uncount_counts int[],
    p_start timestamptz[], p_end timestamptz[], p_allowance bigint[])
RETURNS TABLE (o_status int, o_remaining bigint, o_used bigint, o_allowance bigint,
    o_period_start timestamptz, o_period_end timestamptz, o_reserved bigint)
LANGUAGE plpgsql AS $$
DECLARE
    off int := 0;
    c record;
    last int;
BEGIN
    SELECT i INTO last FROM generate_subscripts(p_settle_account, 1) AS i
     WHERE p_settle_account[i] IS NOT NULL ORDER BY p_start[i] DESC LIMIT 1;
    IF last IS NOT NULL THEN
        PERFORM tollgate_renew(p_settle_account[last], p_start[last], p_end[last], p_allowance[last]);
        -- Settlements that give credits back lock shards: take them all now, in order.
        IF EXISTS (SELECT 1 FROM generate_subscripts(p_request, 1) AS i
                    WHERE p_settle_account[i] IS NOT NULL AND (p_refund[i] > 0 OR p_uncount_counts[i] > 0)) THEN
            PERFORM 1 FROM tollgate_balance_shards s WHERE s.account_id = p_settle_account[last] ORDER BY s.shard FOR UPDATE;
        END IF;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(p_request), 0) LOOP
        c := tollgate_close(p_account, p_request[i], p_release[i],
            p_settle_account[i], p_refund[i], p_uncount[off + 1 : off + p_uncount_counts[i]],
            p_start[i], p_end[i], p_allowance[i]);
        off := off + p_uncount_counts[i];
        o_status := c.o_status;
        o_remaining := c.o_remaining;
        o_used := c.o_used;
        o_allowance := c.o_allowance;
        o_period_start := c.o_period_start;
        o_period_end := c.o_period_end;
        o_reserved := c.o_reserved;
        RETURN NEXT;
    END LOOP;
END
$$;
