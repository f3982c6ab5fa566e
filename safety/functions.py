"""Which SQL functions a statement may call: a per-dialect allowlist plus a denylist that always wins.

A function call is judged on two keys: its sqlglot class, and its lower-cased name without
schema (``pg_catalog.pg_sleep`` is ``pg_sleep``). Functions sqlglot knows (typed classes) are
allowed by family (aggregate, string, temporal, math, json, array and a curated set of
conditionals and casts); functions it does not know (``exp.Anonymous``) must be on the
dialect's name allowlist. Extend it with ``FunctionAllowlist.extend`` or
``SafetyPolicy.extra_functions``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

__all__ = [
    "DENIED_CLASSES",
    "DENIED_NAMES",
    "DENIED_PREFIXES",
    "FunctionAllowlist",
    "FunctionVerdict",
]

# Families of typed functions that compute values only.
_PURE_MODULES = frozenset(
    f"sqlglot.expressions.{m}" for m in ("aggregate", "string", "temporal", "math", "json", "array")
)

_PURE_MISC = frozenset(
    getattr(exp, name)
    for name in (
        "And",
        "Or",
        "Xor",
        "Pow",
        "RegexpLike",
        "ApproxDistinct",
        "Typeof",
        "HashAgg",
        "Case",
        "Cast",
        "CastToStrType",
        "Coalesce",
        "Collate",
        "Convert",
        "DecodeCase",
        "EqualNull",
        "Exists",
        "Greatest",
        "If",
        "IsNullValue",
        "Least",
        "Nullif",
        "Nvl2",
        "Try",
        "TryCast",
        "WidthBucket",
        "JSONCast",
        "ToBoolean",
        "IsArray",
        "Float64",
        "Int64",
        "Rand",
        "Randn",
        "Uuid",
        "CurrentDatabase",
        "CurrentSchema",
        "CurrentUser",
        "CurrentCatalog",
        "CurrentRole",
        "SessionUser",
        "CurrentVersion",
        "Columns",
        "JSONValueArray",
    )
    if hasattr(exp, name)
)

# Typed functions that reach files, the network, sequences or models: never allowed.
DENIED_CLASSES: frozenset[type[exp.Expression]] = frozenset(
    getattr(exp, name)
    for name in (
        "ReadCSV",
        "ReadParquet",
        "ToFile",
        "NextValueFor",
        "GenerateTable",
        "VectorSearch",
        "Predict",
        "MLForecast",
        "MLTranslate",
        "AIClassify",
        "AIEmbed",
        "AIForecast",
        "AIGenerate",
        "AISimilarity",
        "GenerateEmbedding",
        "FeaturesAtTime",
        "Host",
        "NetFunc",
        "RegDomain",
        "ParseIp",
        "CurrentIpAddress",
    )
    if hasattr(exp, name)
)

# Names refused in every dialect, whatever the allowlist says (lower case, no schema).
DENIED_NAMES: dict[str, frozenset[str]] = {
    "postgres": frozenset(
        """
        pg_read_file pg_read_binary_file pg_ls_dir pg_stat_file pg_ls_logdir pg_ls_waldir pg_ls_tmpdir
        pg_ls_archive_statusdir pg_file_write pg_file_rename pg_file_unlink pg_logdir_ls
        lo_import lo_export lo_create lo_creat lo_unlink lo_put lo_from_bytea lo_get lo_open lo_write lo_truncate
        dblink dblink_exec dblink_connect dblink_connect_u dblink_open dblink_send_query dblink_get_result
        set_config pg_sleep pg_sleep_for pg_sleep_until
        pg_advisory_lock pg_advisory_lock_shared pg_advisory_xact_lock pg_advisory_xact_lock_shared
        pg_try_advisory_lock pg_try_advisory_lock_shared pg_try_advisory_xact_lock
        pg_try_advisory_xact_lock_shared pg_advisory_unlock pg_advisory_unlock_all pg_advisory_unlock_shared
        pg_notify pg_terminate_backend pg_cancel_backend pg_reload_conf pg_rotate_logfile pg_promote
        pg_switch_wal pg_create_restore_point pg_start_backup pg_stop_backup pg_backup_start pg_backup_stop
        pg_logical_emit_message pg_create_logical_replication_slot pg_create_physical_replication_slot
        pg_drop_replication_slot pg_replication_origin_create pg_import_system_collations
        pg_stat_reset pg_stat_reset_shared pg_stat_reset_single_table_counters
        query_to_xml query_to_xml_and_xmlschema query_to_xmlschema table_to_xml cursor_to_xml
        schema_to_xml database_to_xml database_to_xml_and_xmlschema
        nextval setval txid_current pg_current_xact_id current_setting pg_reload_conf
        """.split()
    ),
    "mysql": frozenset(
        """
        load_file sleep benchmark get_lock release_lock release_all_locks is_free_lock is_used_lock
        master_pos_wait source_pos_wait wait_for_executed_gtid_set wait_until_sql_thread_after_gtids
        sys_exec sys_eval name_const uuid_short last_insert_id
        """.split()
    ),
    "sqlite": frozenset(
        """
        load_extension fts3_tokenizer randomblob zeroblob readfile writefile edit fsdir
        sqlite_compileoption_get sqlite_compileoption_used
        """.split()
    ),
    "duckdb": frozenset(
        """
        read_csv read_csv_auto read_parquet parquet_scan read_json read_json_auto read_json_objects
        read_ndjson read_ndjson_auto read_ndjson_objects read_text read_blob glob query query_table
        sniff_csv iceberg_scan delta_scan parquet_metadata parquet_schema parquet_file_metadata
        parquet_kv_metadata sqlite_scan sqlite_attach postgres_scan postgres_attach postgres_query
        postgres_execute mysql_scan mysql_query mysql_execute read_xlsx getenv current_setting
        duckdb_secrets duckdb_settings install_extension load_extension checkpoint force_checkpoint
        pragma_database_size nextval setval currval
        """.split()
    ),
}

# Name prefixes of catalog and settings functions, refused in the dialect whatever the allowlist.
DENIED_PREFIXES: dict[str, tuple[str, ...]] = {
    "duckdb": ("duckdb_", "pragma_"),
    "sqlite": ("pragma_", "sqlite_"),
}

_COMMON = """
abs avg count max min sum total round coalesce ifnull nullif length lower upper trim ltrim rtrim
replace substr substring instr cast case like
""".split()

# Functions sqlglot parses as exp.Anonymous that are pure in the given database.
_ALLOWED_NAMES: dict[str, frozenset[str]] = {
    "sqlite": frozenset(
        _COMMON
        + """
        glob printf format char hex unhex unicode quote typeof likely unlikely likelihood soundex
        julianday unixepoch date time datetime strftime timediff group_concat string_agg
        total_changes_never iif changes_never json json_extract json_array json_object json_type
        json_valid json_group_array json_group_object json_each json_tree json_array_length
        row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
        nth_value sign ceil ceiling floor trunc ln log log2 log10 exp pow power sqrt mod pi
        sin cos tan asin acos atan atan2 degrees radians octet_length concat concat_ws
        """.split()
    ),
    "postgres": frozenset(
        _COMMON
        + """
        to_char to_date to_timestamp to_number date_part date_trunc age extract justify_days
        justify_hours justify_interval make_date make_time make_timestamp make_interval now
        clock_timestamp statement_timestamp transaction_timestamp timeofday isfinite
        string_agg array_agg array_length array_position array_positions array_to_string
        string_to_array unnest cardinality split_part strpos position left right lpad rpad
        initcap repeat reverse translate btrim chr ascii md5 sha256 encode decode format
        regexp_replace regexp_match regexp_matches regexp_split_to_array regexp_split_to_table
        concat concat_ws char_length character_length octet_length bit_length overlay
        starts_with quote_ident quote_literal quote_nullable to_hex
        generate_series generate_subscripts width_bucket random greatest least
        json_build_object jsonb_build_object json_agg jsonb_agg json_object_agg jsonb_object_agg
        json_array_length jsonb_array_length json_extract_path jsonb_extract_path json_extract_path_text
        jsonb_extract_path_text to_json to_jsonb row_to_json jsonb_pretty json_typeof jsonb_typeof
        jsonb_set jsonb_insert json_each jsonb_each json_each_text jsonb_each_text
        bool_and bool_or every bit_and bit_or stddev stddev_pop stddev_samp variance var_pop var_samp
        corr covar_pop covar_samp regr_slope regr_intercept percentile_cont percentile_disc mode
        row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
        abs ceil ceiling floor trunc sign sqrt cbrt exp ln log log10 power pow mod pi div
        degrees radians sin cos tan asin acos atan atan2 scale
        date_bin to_char numeric float8 int4 int8 text
        current_database current_schema current_user session_user version pg_typeof
        """.split()
    ),
    "mysql": frozenset(
        _COMMON
        + """
        concat concat_ws group_concat char_length character_length octet_length locate position
        left right lpad rpad repeat reverse space strcmp field find_in_set elt make_set export_set
        format hex unhex ascii ord char bin oct conv lcase ucase mid insert_str soundex quote
        date_format str_to_date date_add date_sub adddate subdate datediff timediff timestampdiff
        timestampadd dayname dayofmonth dayofweek dayofyear monthname weekday weekofyear yearweek
        year month day hour minute second quarter week last_day makedate maketime from_days to_days
        from_unixtime unix_timestamp sec_to_time time_to_sec now curdate curtime sysdate
        utc_date utc_time utc_timestamp extract date time timestamp convert_tz period_add period_diff
        if ifnull isnull nvl greatest least interval
        abs ceil ceiling floor round truncate sign sqrt exp ln log log2 log10 pow power mod pi rand
        degrees radians sin cos tan asin acos atan atan2 cot crc32 md5 sha1 sha2
        std stddev stddev_pop stddev_samp variance var_pop var_samp bit_and bit_or bit_xor
        row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
        json_extract json_unquote json_object json_array json_arrayagg json_objectagg json_contains
        json_length json_keys json_type json_valid
        database schema user current_user version charset collation
        """.split()
    ),
    "duckdb": frozenset(
        _COMMON
        + """
        concat concat_ws string_agg group_concat list listagg array_agg list_agg list_value list_extract
        list_contains list_sort list_distinct unnest array_length len strlen left right lpad rpad
        repeat reverse split_part string_split regexp_matches regexp_replace regexp_extract
        starts_with ends_with contains prefix suffix position strpos chr ascii md5 sha256 hash
        format printf date_part date_trunc date_diff datediff date_sub date_add datepart
        strftime strptime epoch epoch_ms make_date make_time make_timestamp age now today
        current_date dayname monthname yearweek last_day
        generate_series range greatest least random setseed uuid gen_random_uuid
        row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
        abs ceil ceiling floor trunc sign sqrt cbrt exp ln log log2 log10 pow power mod pi
        degrees radians sin cos tan asin acos atan atan2 even gamma factorial
        arg_max arg_min max_by min_by any_value first last mode median quantile quantile_cont
        quantile_disc approx_count_distinct approx_quantile bool_and bool_or stddev stddev_pop
        stddev_samp variance var_pop var_samp corr covar_pop covar_samp histogram entropy kurtosis skewness
        json json_extract json_extract_string json_object json_array json_structure json_type json_valid
        struct_pack struct_extract map map_extract typeof try_cast
        """.split()
    ),
}


class FunctionVerdict:
    """Why a call was refused: a finding code and the lower-cased name that was judged."""

    __slots__ = ("code", "name")

    def __init__(self, code: str, name: str) -> None:
        self.code = code
        self.name = name


def function_name(node: exp.Func) -> str:
    """Lower-cased name of a call without schema, as written for unknown functions."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


class FunctionAllowlist:
    """The per-dialect allowlist of function calls; call it on a ``exp.Func`` node.

    Example:
        >>> import sqlglot
        >>> allow = FunctionAllowlist.for_dialect("postgres")
        >>> allow(sqlglot.parse_one("SELECT pg_sleep(1)", read="postgres").selects[0]).code
        'function_denied'
        >>> allow.extend("my_udf")(sqlglot.parse_one("SELECT my_udf(1)", read="postgres").selects[0]) is None
        True
    """

    def __init__(
        self,
        dialect: str,
        allowed_names: Iterable[str] = (),
        denied_names: Iterable[str] = (),
        denied_classes: Iterable[type[exp.Expression]] = DENIED_CLASSES,
    ) -> None:
        self.dialect = dialect
        self.allowed_names = frozenset(n.lower() for n in allowed_names)
        self.denied_names = frozenset(n.lower() for n in denied_names)
        self.denied_classes = tuple(denied_classes)

    @classmethod
    def for_dialect(cls, dialect: str) -> FunctionAllowlist:
        """The built-in allowlist and denylist of ``dialect``."""
        allowed = _ALLOWED_NAMES.get(dialect, frozenset())
        # A name dangerous in any database is refused everywhere unless it is pure in this one.
        elsewhere = set().union(*(names for d, names in DENIED_NAMES.items() if d != dialect))
        denied = DENIED_NAMES.get(dialect, frozenset()) | (elsewhere - allowed)
        return cls(dialect, allowed, denied)

    def extend(self, *names: str) -> FunctionAllowlist:
        """A copy that also allows ``names`` (never overriding the denylist)."""
        return FunctionAllowlist(
            self.dialect,
            self.allowed_names | {n.lower() for n in names},
            self.denied_names,
            self.denied_classes,
        )

    def deny(self, *names: str) -> FunctionAllowlist:
        """A copy that also refuses ``names``."""
        return FunctionAllowlist(
            self.dialect,
            self.allowed_names,
            self.denied_names | {n.lower() for n in names},
            self.denied_classes,
        )

    def __call__(self, node: exp.Func) -> FunctionVerdict | None:
        """None when the call is allowed, else the verdict."""
        name = function_name(node)
        if (
            isinstance(node, self.denied_classes)
            or name in self.denied_names
            or name.startswith(DENIED_PREFIXES.get(self.dialect, ()) or ("\0",))
        ):
            return FunctionVerdict("function_denied", name)
        if isinstance(node, exp.Anonymous) or type(node) in (
            exp.AnonymousAggFunc,
            exp.CombinedAggFunc,
        ):
            if name in self.allowed_names:
                return None
            return FunctionVerdict("function_not_allowed", name)
        if type(node).__module__ in _PURE_MODULES or type(node) in _PURE_MISC:
            return None
        if name in self.allowed_names:
            return None
        return FunctionVerdict("function_not_allowed", name)
