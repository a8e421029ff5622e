-- online: yes
-- Free-text screens without trailing-character holes (security review M4). Redefines the
-- SQL screens to decide exactly as the C++ SDK's (outbox/sdk/payload.hpp):
--   * a JWT is three or more dotted base64url segments from "eyJ", whatever follows them
--     (V8 and V11 let a trailing "." defeat the rule);
--   * the e-mail, phone and digit-run rules read the text with look-alikes folded by the
--     new outbox_fold_free_text(): every Unicode decimal digit (category Nd, Unicode 15)
--     becomes its ASCII digit, and the fullwidth and small commercial at (U+FF20, U+FE6B)
--     become "@".
--
-- outbox_publish() no longer answers a repeated dedup_key with the existing event's id when
-- the calling login cannot read event_publication (the publisher role): that role may name
-- any company_id, so the id would be a read oracle into other companies (review L6). It
-- returns NULL then; logins that may read events (hosts, the owner) get the id as before.
--
-- Online: signatures are unchanged (CREATE OR REPLACE keeps grants and callers), and no
-- table changes. The only difference for hosts and publishers of the previous release is
-- that outbox_publish() now refuses values shaped like an e-mail address, a JWT or a phone
-- number that slipped past the old rules, with the same SQLSTATE 22023 and message shape.
-- Rows already stored are not re-checked. A publisher of the previous release that reads
-- the id of a duplicate publish gets NULL instead when it connects as the publisher role.

-- The text the free-text rules read; detail::fold_look_alikes() in the SDK folds the same
-- characters. Each line holds the ten digits of three scripts, zero to nine. The body is
-- parsed at call time, so it pins standard_conforming_strings for its U&'' literals.
CREATE FUNCTION outbox_fold_free_text(p_value text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT SET standard_conforming_strings = on AS $$
    SELECT pg_catalog.translate(p_value,
        U&'\0660\0661\0662\0663\0664\0665\0666\0667\0668\0669\06F0\06F1\06F2\06F3\06F4\06F5\06F6\06F7\06F8\06F9\07C0\07C1\07C2\07C3\07C4\07C5\07C6\07C7\07C8\07C9'
        || U&'\0966\0967\0968\0969\096A\096B\096C\096D\096E\096F\09E6\09E7\09E8\09E9\09EA\09EB\09EC\09ED\09EE\09EF\0A66\0A67\0A68\0A69\0A6A\0A6B\0A6C\0A6D\0A6E\0A6F'
        || U&'\0AE6\0AE7\0AE8\0AE9\0AEA\0AEB\0AEC\0AED\0AEE\0AEF\0B66\0B67\0B68\0B69\0B6A\0B6B\0B6C\0B6D\0B6E\0B6F\0BE6\0BE7\0BE8\0BE9\0BEA\0BEB\0BEC\0BED\0BEE\0BEF'
        || U&'\0C66\0C67\0C68\0C69\0C6A\0C6B\0C6C\0C6D\0C6E\0C6F\0CE6\0CE7\0CE8\0CE9\0CEA\0CEB\0CEC\0CED\0CEE\0CEF\0D66\0D67\0D68\0D69\0D6A\0D6B\0D6C\0D6D\0D6E\0D6F'
        || U&'\0DE6\0DE7\0DE8\0DE9\0DEA\0DEB\0DEC\0DED\0DEE\0DEF\0E50\0E51\0E52\0E53\0E54\0E55\0E56\0E57\0E58\0E59\0ED0\0ED1\0ED2\0ED3\0ED4\0ED5\0ED6\0ED7\0ED8\0ED9'
        || U&'\0F20\0F21\0F22\0F23\0F24\0F25\0F26\0F27\0F28\0F29\1040\1041\1042\1043\1044\1045\1046\1047\1048\1049\1090\1091\1092\1093\1094\1095\1096\1097\1098\1099'
        || U&'\17E0\17E1\17E2\17E3\17E4\17E5\17E6\17E7\17E8\17E9\1810\1811\1812\1813\1814\1815\1816\1817\1818\1819\1946\1947\1948\1949\194A\194B\194C\194D\194E\194F'
        || U&'\19D0\19D1\19D2\19D3\19D4\19D5\19D6\19D7\19D8\19D9\1A80\1A81\1A82\1A83\1A84\1A85\1A86\1A87\1A88\1A89\1A90\1A91\1A92\1A93\1A94\1A95\1A96\1A97\1A98\1A99'
        || U&'\1B50\1B51\1B52\1B53\1B54\1B55\1B56\1B57\1B58\1B59\1BB0\1BB1\1BB2\1BB3\1BB4\1BB5\1BB6\1BB7\1BB8\1BB9\1C40\1C41\1C42\1C43\1C44\1C45\1C46\1C47\1C48\1C49'
        || U&'\1C50\1C51\1C52\1C53\1C54\1C55\1C56\1C57\1C58\1C59\A620\A621\A622\A623\A624\A625\A626\A627\A628\A629\A8D0\A8D1\A8D2\A8D3\A8D4\A8D5\A8D6\A8D7\A8D8\A8D9'
        || U&'\A900\A901\A902\A903\A904\A905\A906\A907\A908\A909\A9D0\A9D1\A9D2\A9D3\A9D4\A9D5\A9D6\A9D7\A9D8\A9D9\A9F0\A9F1\A9F2\A9F3\A9F4\A9F5\A9F6\A9F7\A9F8\A9F9'
        || U&'\AA50\AA51\AA52\AA53\AA54\AA55\AA56\AA57\AA58\AA59\ABF0\ABF1\ABF2\ABF3\ABF4\ABF5\ABF6\ABF7\ABF8\ABF9\FF10\FF11\FF12\FF13\FF14\FF15\FF16\FF17\FF18\FF19'
        || U&'\+0104A0\+0104A1\+0104A2\+0104A3\+0104A4\+0104A5\+0104A6\+0104A7\+0104A8\+0104A9\+010D30\+010D31\+010D32\+010D33\+010D34\+010D35\+010D36\+010D37\+010D38\+010D39\+011066\+011067\+011068\+011069\+01106A\+01106B\+01106C\+01106D\+01106E\+01106F'
        || U&'\+0110F0\+0110F1\+0110F2\+0110F3\+0110F4\+0110F5\+0110F6\+0110F7\+0110F8\+0110F9\+011136\+011137\+011138\+011139\+01113A\+01113B\+01113C\+01113D\+01113E\+01113F\+0111D0\+0111D1\+0111D2\+0111D3\+0111D4\+0111D5\+0111D6\+0111D7\+0111D8\+0111D9'
        || U&'\+0112F0\+0112F1\+0112F2\+0112F3\+0112F4\+0112F5\+0112F6\+0112F7\+0112F8\+0112F9\+011450\+011451\+011452\+011453\+011454\+011455\+011456\+011457\+011458\+011459\+0114D0\+0114D1\+0114D2\+0114D3\+0114D4\+0114D5\+0114D6\+0114D7\+0114D8\+0114D9'
        || U&'\+011650\+011651\+011652\+011653\+011654\+011655\+011656\+011657\+011658\+011659\+0116C0\+0116C1\+0116C2\+0116C3\+0116C4\+0116C5\+0116C6\+0116C7\+0116C8\+0116C9\+011730\+011731\+011732\+011733\+011734\+011735\+011736\+011737\+011738\+011739'
        || U&'\+0118E0\+0118E1\+0118E2\+0118E3\+0118E4\+0118E5\+0118E6\+0118E7\+0118E8\+0118E9\+011950\+011951\+011952\+011953\+011954\+011955\+011956\+011957\+011958\+011959\+011C50\+011C51\+011C52\+011C53\+011C54\+011C55\+011C56\+011C57\+011C58\+011C59'
        || U&'\+011D50\+011D51\+011D52\+011D53\+011D54\+011D55\+011D56\+011D57\+011D58\+011D59\+011DA0\+011DA1\+011DA2\+011DA3\+011DA4\+011DA5\+011DA6\+011DA7\+011DA8\+011DA9\+011F50\+011F51\+011F52\+011F53\+011F54\+011F55\+011F56\+011F57\+011F58\+011F59'
        || U&'\+016A60\+016A61\+016A62\+016A63\+016A64\+016A65\+016A66\+016A67\+016A68\+016A69\+016AC0\+016AC1\+016AC2\+016AC3\+016AC4\+016AC5\+016AC6\+016AC7\+016AC8\+016AC9\+016B50\+016B51\+016B52\+016B53\+016B54\+016B55\+016B56\+016B57\+016B58\+016B59'
        || U&'\+01D7CE\+01D7CF\+01D7D0\+01D7D1\+01D7D2\+01D7D3\+01D7D4\+01D7D5\+01D7D6\+01D7D7\+01D7D8\+01D7D9\+01D7DA\+01D7DB\+01D7DC\+01D7DD\+01D7DE\+01D7DF\+01D7E0\+01D7E1\+01D7E2\+01D7E3\+01D7E4\+01D7E5\+01D7E6\+01D7E7\+01D7E8\+01D7E9\+01D7EA\+01D7EB'
        || U&'\+01D7EC\+01D7ED\+01D7EE\+01D7EF\+01D7F0\+01D7F1\+01D7F2\+01D7F3\+01D7F4\+01D7F5\+01D7F6\+01D7F7\+01D7F8\+01D7F9\+01D7FA\+01D7FB\+01D7FC\+01D7FD\+01D7FE\+01D7FF\+01E140\+01E141\+01E142\+01E143\+01E144\+01E145\+01E146\+01E147\+01E148\+01E149'
        || U&'\+01E2F0\+01E2F1\+01E2F2\+01E2F3\+01E2F4\+01E2F5\+01E2F6\+01E2F7\+01E2F8\+01E2F9\+01E4F0\+01E4F1\+01E4F2\+01E4F3\+01E4F4\+01E4F5\+01E4F6\+01E4F7\+01E4F8\+01E4F9\+01E950\+01E951\+01E952\+01E953\+01E954\+01E955\+01E956\+01E957\+01E958\+01E959'
        || U&'\+01FBF0\+01FBF1\+01FBF2\+01FBF3\+01FBF4\+01FBF5\+01FBF6\+01FBF7\+01FBF8\+01FBF9'
        || U&'\FF20\FE6B',
        pg_catalog.repeat('0123456789', 67) || '@@')
$$;

-- V8's outbox_check_free_text with the rules above.
CREATE OR REPLACE FUNCTION outbox_check_free_text(p_value text, p_field text)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
DECLARE
    v_rule text;
    v_text text;
BEGIN
    IF p_value IS NULL THEN
        RETURN;
    END IF;
    v_text := outbox_fold_free_text(p_value);
    IF v_text ~ ('[^ ]@[^ ' || pg_catalog.chr(9) || pg_catalog.chr(10) || '.]+[.][^ '
                 || pg_catalog.chr(9) || pg_catalog.chr(10) || ']') THEN
        v_rule := 'value is shaped like an e-mail address';
    ELSIF v_text ~ 'eyJ[A-Za-z0-9_-]*([.][A-Za-z0-9_-]+){2,}' THEN
        v_rule := 'value is shaped like a JWT';
    ELSIF v_text ~ '^[0-9 +.()-]+$' AND v_text ~ '[ +.()-]'
          AND pg_catalog.length(pg_catalog.regexp_replace(v_text, '[^0-9]', '', 'g')) >= 9 THEN
        v_rule := 'value is shaped like a phone number';
    ELSIF v_text ~ '[0-9]{13}' AND v_text !~ '^[0-9]+$' THEN
        v_rule := 'value contains a run of 13 or more digits';
    END IF;
    IF v_rule IS NOT NULL THEN
        RAISE EXCEPTION '%: %', p_field, v_rule USING ERRCODE = '22023';
    END IF;
END
$$;

-- V11's outbox_check_registered_payload with the rules above; the identifier character
-- check still reads the text as given.
CREATE OR REPLACE FUNCTION outbox_check_registered_payload(p_event_type text, p_payload jsonb)
RETURNS void LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    v_fields   jsonb;
    v_key      text;
    v_value    jsonb;
    v_spec     jsonb;
    v_type     text;
    v_text     text;
    v_folded   text;
    v_max      integer;
    v_required boolean;
BEGIN
    SELECT fields INTO v_fields FROM outbox_event_type WHERE event_type = p_event_type;
    IF NOT FOUND THEN
        SELECT value = 'true'::jsonb INTO v_required FROM outbox_setting WHERE name = 'require_registered_types';
        IF v_required THEN
            RAISE EXCEPTION 'outbox_publish: event type % is not registered and outbox.require_registered_types is on; register it with outboxd event-types apply', p_event_type
                USING ERRCODE = '22023';
        END IF;
        RETURN;
    END IF;
    FOR v_key, v_value IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(p_payload) AS e LOOP
        v_spec := v_fields -> v_key;
        IF v_spec IS NULL THEN
            RAISE EXCEPTION 'outbox_publish: payload field "%" is not declared for event type %', v_key, p_event_type
                USING ERRCODE = '22023';
        END IF;
        v_type := v_spec ->> 'type';
        IF v_type = 'string' THEN
            IF pg_catalog.jsonb_typeof(v_value) <> 'string' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" must be a string', v_key USING ERRCODE = '22023';
            END IF;
            v_text := v_value #>> '{}';
            v_folded := outbox_fold_free_text(v_text);
            v_max := coalesce((v_spec ->> 'max_length')::integer, 256);
            IF v_text = '' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is empty', v_key USING ERRCODE = '22023';
            END IF;
            IF pg_catalog.octet_length(v_text) > v_max THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is longer than % bytes', v_key, v_max
                    USING ERRCODE = '22023';
            END IF;
            IF coalesce((v_spec ->> 'identifier')::boolean, false) THEN
                IF v_text !~ '^[A-Za-z0-9_.:-]+$' THEN
                    RAISE EXCEPTION 'outbox_publish: payload field "%" is an identifier: only letters, digits and _ . : - are allowed', v_key
                        USING ERRCODE = '22023';
                END IF;
            ELSIF v_folded ~ '[^ ]@[^ \t\n.]+\.[^ \t\n]' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is shaped like an e-mail address', v_key
                    USING ERRCODE = '22023';
            END IF;
            -- Three or more dotted base64url segments from "eyJ", whatever follows them.
            IF v_folded ~ 'eyJ[A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+){2,}' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is shaped like a JWT', v_key USING ERRCODE = '22023';
            END IF;
            IF coalesce((v_spec ->> 'identifier')::boolean, false) THEN
                IF v_folded ~ '^[0-9 +.()-]*$' AND v_folded ~ '[ +.()-]'
                   AND pg_catalog.length(pg_catalog.regexp_replace(v_folded, '[^0-9]', '', 'g')) >= 9 THEN
                    RAISE EXCEPTION 'outbox_publish: payload field "%" is shaped like a phone number', v_key
                        USING ERRCODE = '22023';
                END IF;
                IF v_folded ~ '[0-9]{13}' THEN
                    RAISE EXCEPTION 'outbox_publish: payload field "%" contains a run of 13 or more digits', v_key
                        USING ERRCODE = '22023';
                END IF;
            ELSIF v_folded ~ '[0-9]([ +.()-]*[0-9]){8}' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is shaped like a phone number or long digit run', v_key
                    USING ERRCODE = '22023';
            END IF;
        ELSIF v_type = 'integer' THEN
            IF pg_catalog.jsonb_typeof(v_value) <> 'number' OR v_value::text !~ '^-?[0-9]+$' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" must be an integer', v_key USING ERRCODE = '22023';
            END IF;
            IF (v_value::text)::numeric NOT BETWEEN -9223372036854775808 AND 9223372036854775807 THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" does not fit in a 64-bit integer', v_key
                    USING ERRCODE = '22023';
            END IF;
        ELSIF v_type = 'number' THEN
            IF pg_catalog.jsonb_typeof(v_value) <> 'number' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" must be a number', v_key USING ERRCODE = '22023';
            END IF;
            IF pg_catalog.abs((v_value::text)::numeric) > 1.7976931348623157e308 THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is not a finite double', v_key USING ERRCODE = '22023';
            END IF;
        ELSIF v_type = 'boolean' THEN
            IF pg_catalog.jsonb_typeof(v_value) <> 'boolean' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" must be true or false', v_key USING ERRCODE = '22023';
            END IF;
        ELSE
            RAISE EXCEPTION 'outbox_publish: the registry declares field "%" of % with an unknown type', v_key, p_event_type
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
END
$$;

-- V11's outbox_publish with the dedup answer above.
CREATE OR REPLACE FUNCTION outbox_publish(
    p_company_id text,
    p_event_type text,
    p_payload jsonb,
    p_aggregate_key text DEFAULT NULL,
    p_dedup_key text DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    v_id uuid;
    v_bad_key text;
BEGIN
    IF p_company_id IS NULL OR length(p_company_id) = 0 OR length(p_company_id) > 100 THEN
        RAISE EXCEPTION 'outbox_publish: company_id must be 1 to 100 characters' USING ERRCODE = '22023';
    END IF;
    IF p_event_type IS NULL OR p_event_type !~ '^[A-Z][A-Za-z0-9]{0,99}$' THEN
        RAISE EXCEPTION 'outbox_publish: event_type must be PascalCase letters and digits, e.g. WebsiteRegistered'
            USING ERRCODE = '22023';
    END IF;
    IF p_payload IS NULL OR jsonb_typeof(p_payload) <> 'object' THEN
        RAISE EXCEPTION 'outbox_publish: payload must be a JSON object' USING ERRCODE = '22023';
    END IF;
    SELECT key INTO v_bad_key FROM jsonb_each(p_payload)
        WHERE jsonb_typeof(value) IN ('object', 'array') LIMIT 1;
    IF v_bad_key IS NOT NULL THEN
        RAISE EXCEPTION 'outbox_publish: payload field "%" is nested; only scalar values are allowed', v_bad_key
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_payload::text) > 8192 THEN
        RAISE EXCEPTION 'outbox_publish: payload is larger than 8192 bytes' USING ERRCODE = '22023';
    END IF;
    PERFORM outbox_check_registered_payload(p_event_type, p_payload);
    IF p_aggregate_key IS NOT NULL AND (length(p_aggregate_key) = 0 OR length(p_aggregate_key) > 200) THEN
        RAISE EXCEPTION 'outbox_publish: aggregate_key must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    PERFORM outbox_check_free_text(p_aggregate_key, 'outbox_publish: aggregate_key');
    IF p_dedup_key IS NOT NULL AND (length(p_dedup_key) = 0 OR length(p_dedup_key) > 200) THEN
        RAISE EXCEPTION 'outbox_publish: dedup_key must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;

    IF p_dedup_key IS NULL THEN
        INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, payload)
            VALUES (p_company_id, p_event_type, p_aggregate_key,
                    outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_payload)
            RETURNING event_id INTO v_id;
    ELSE
        INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, dedup_key, payload)
            VALUES (p_company_id, p_event_type, p_aggregate_key,
                    outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_dedup_key, p_payload)
            ON CONFLICT (company_id, event_type, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
            RETURNING event_id INTO v_id;
        IF v_id IS NULL THEN
            -- The publisher role names any company_id, so the existing event's id goes only
            -- to a login that may read events anyway; the publisher role gets NULL.
            IF NOT pg_catalog.has_table_privilege(session_user, 'event_publication', 'SELECT') THEN
                RETURN NULL;
            END IF;
            SELECT event_id INTO v_id FROM event_publication
                WHERE company_id = p_company_id AND event_type = p_event_type AND dedup_key = p_dedup_key;
            RETURN v_id;
        END IF;
    END IF;
    -- Identical notifications in one transaction are folded into one by PostgreSQL.
    PERFORM pg_notify('outboxd_events', p_event_type);
    RETURN v_id;
END
$$;
