"""Differential test of the admin APIs: the same raw requests to Ketch and to Apache Kafka 4.1,
the decoded responses compared field by field.

`go/admindiff` (built into `.cache/go/admindiff`) sends a fixed sequence of requests, each pinned
to an explicit version both brokers advertise (no negotiation: the same bytes reach both), and
prints every decoded response as one JSON line (`{"step", "api", "key", "version", "response"}`,
`{"step", ..., "error"}` when the connection broke or the response did not decode, or
`{"step", ..., "skipped"}` for an optional step whose API the broker does not advertise). JSON keeps what clients compare: a null nullable string is `null`,
an empty one `""`. The sequence covers every admin API Ketch advertises (topics, partitions,
configs, records, log dirs, cluster, elections, reassignments, ACLs, groups, transactions,
producers), their common error cases, and older versions next to the newest.

This test starts both brokers itself (whatever KETCH_COMPAT_TARGET says), runs the program
against each, applies the few normalizations below (things that differ between any two brokers)
and fails listing every remaining difference: step, API and version, JSON path, Ketch's value,
Kafka's value. Lists of named things (topics, partitions, configs, groups...) are matched by
name, not position. By hand:

    compat-tests/.cache/go/admindiff -brokers 127.0.0.1:PORT [-scenario topics]

The raw outputs are kept as ketch.jsonl and kafka.jsonl in the test's tmp_path
(/tmp/pytest-of-$USER/pytest-current/test_admin_responses_match_kaf0/). About 20 s.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from conftest import BrokerStartError, KafkaBroker, KetchBroker, go_build, run_logged

RUN_TIMEOUT = 90  # seconds per program run (its own deadline is 60 s)

# ---------------------------------------------------------------------------------------------
# What legitimately differs between two brokers, and why. Keep this short.
# ---------------------------------------------------------------------------------------------

# Fields removed before comparing.
DROPPED_FIELDS = {
    "ThrottleMillis": "quota throttling depends on timing, not on the request",
    "Version": "the response version is the request's, set by the program",
}


def _now_ms() -> int:
    return int(time.time() * 1000)


UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def _norm_value(field: str, value, now: int):
    """Per-field value normalizations (field names are kmsg's Go names)."""
    if field == "ClusterID" and value is not None:
        return "<cluster-id>"  # each broker has its own cluster id
    if field == "Port" and isinstance(value, int) and value > 0:
        return "<port>"  # each broker listens on its own ephemeral port
    if field == "TopicID" and value != ZERO_UUID:
        return "<topic-id>"  # random per broker; the zero id (no topic) is kept
    if value == ZERO_UUID:
        return value
    if field == "ProducerID" and isinstance(value, int) and value >= 0:
        return "<producer-id>"  # allocated by each broker
    if field in ("LogDir", "Dir") and isinstance(value, str):
        return "<log-dir>"  # each broker has its own temporary data directory
    if field in ("Size", "TotalBytes", "UsableBytes") and isinstance(value, int) and value >= 0:
        return "<bytes>"  # on-disk sizes: segment preallocation, index files and free space differ
    if isinstance(value, int) and ("Timestamp" in field or field.endswith("Time")) and abs(value - now) < 86_400_000:
        return "<now>"  # broker wall-clock times (transaction start, last producer write)
    if isinstance(value, str) and UUID_RE.search(value):
        return UUID_RE.sub("<uuid>", value)  # generated member ids: "<client id>-<uuid>"
    return value


# Ketch's own settings (no Kafka equivalent) in a DescribeConfigs of the broker: left out.
KETCH_ONLY_CONFIG_PREFIX = "ketch."

# Broker configs whose values (and sources) are the harness's: ports and paths, which Ketch
# cannot be given the same as Kafka (see NOT_FOR_KETCH).
HARNESS_BROKER_CONFIGS = {"log.dirs", "listeners", "advertised.listeners", "controller.quorum.voters"}

# Genuine differences accepted for now: (step pattern, path pattern, reason); '*' matches
# anything. Keep it short.
_FEATURES = ("Ketch finalizes only transaction.version (2): group.version is left out (Ketch serves the KIP-848 "
             "consumer protocol without the feature switch), and metadata.version, kraft.version, share.version and ELR are KRaft "
             "cluster features (issue 14); Kafka's epoch is its metadata offset")
KNOWN_DIFFERENCES: list[tuple[str, str, str]] = [
    ("api-versions", ".SupportedFeatures*", _FEATURES),
    ("api-versions", ".FinalizedFeatures*", _FEATURES),
    ("describe-configs-broker-logger", "*", "Ketch has no log4j loggers to list (its level is ketch.log.level)"),
    ("describe-configs-broker-all", "*[Name=log.dir].Value", "Ketch's default data directory is ./data on purpose"),
    ("describe-configs-broker-all", "*[Name=socket.receive.buffer.bytes].Value",
     "Ketch leaves the receive buffer to the OS (-1): Kafka's 100 KiB held large produce requests back"),
    ("describe-producers*", "*.CoordinatorEpoch",
     "producer state does not record the coordinator epoch of markers yet (coordinator epochs come with issue 14)"),
]


# ---------------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------------

KEY_FIELDS = ("ApiKey", "Topic", "Name", "ResourceName", "Group", "TransactionalID", "Partition", "NodeID",
              "MemberID", "LogDir", "ProducerID", "Principal", "Key")


def normalize(obj, now: int, field: str = ""):
    if isinstance(obj, dict):
        return {k: normalize(v, now, k) for k, v in obj.items() if k not in DROPPED_FIELDS}
    if isinstance(obj, list):
        return [normalize(v, now, field) for v in obj]
    return _norm_value(field, obj, now)


def _list_key(a: list, b: list):
    """The field that names the elements of both lists (unique in each), or None."""
    items = a + b
    if not items or not all(isinstance(x, dict) for x in items):
        return None
    for k in KEY_FIELDS:
        if all(k in x for x in items):
            if len({json.dumps(x[k]) for x in a}) == len(a) and len({json.dumps(x[k]) for x in b}) == len(b):
                return k
    return None


def diff(ketch, kafka, path: str = "") -> list[tuple[str, object, object]]:
    """(path, ketch value, kafka value) for every difference."""
    if isinstance(ketch, dict) and isinstance(kafka, dict):
        out = []
        for k in sorted(set(ketch) | set(kafka)):
            if k not in ketch:
                out.append((f"{path}.{k}", "<absent>", kafka[k]))
            elif k not in kafka:
                out.append((f"{path}.{k}", ketch[k], "<absent>"))
            else:
                out += diff(ketch[k], kafka[k], f"{path}.{k}")
        return out
    if isinstance(ketch, list) and isinstance(kafka, list):
        key = _list_key(ketch, kafka)
        if key is None:
            if len(ketch) == len(kafka) and all(isinstance(x, (dict, list)) for x in ketch + kafka):
                out = []
                for i, (x, y) in enumerate(zip(ketch, kafka)):
                    out += diff(x, y, f"{path}[{i}]")
                return out
            return [] if ketch == kafka else [(path, ketch, kafka)]
        kk = {json.dumps(x[key]): x for x in ketch}
        ka = {json.dumps(x[key]): x for x in kafka}
        out = []
        for name in list(ka) + [n for n in kk if n not in ka]:
            label = f"{path}[{key}={json.loads(name)}]"
            if name not in kk:
                out.append((label, "<missing>", _brief(ka[name])))
            elif name not in ka:
                out.append((label, _brief(kk[name]), "<missing>"))
            else:
                out += diff(kk[name], ka[name], label)
        return out
    return [] if ketch == kafka else [(path, ketch, kafka)]


def _brief(v) -> str:
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 300 else s[:297] + "..."


def special_cases(step: str, ketch: dict, kafka: dict, info: list[str]) -> None:
    """Step-specific normalizations (in place), each with its reason."""
    if step == "api-versions-unsupported-v5":
        # one line for the whole table rather than one per API key
        for r in (ketch, kafka):
            r["ApiKeys"] = sorted(k["ApiKey"] for k in r.get("ApiKeys") or [])
    elif step.startswith("api-versions") and "ApiKeys" in (ketch or {}) and "ApiKeys" in (kafka or {}):
        # Ketch advertises an API only once it fully works (clients switch protocols on what they
        # see): the APIs only Kafka advertises are a feature list, reported but not compared.
        ours = {k["ApiKey"] for k in ketch["ApiKeys"]}
        only = [k for k in kafka["ApiKeys"] if k["ApiKey"] not in ours]
        if only and not any(i.startswith("APIs only Kafka") for i in info):
            info.append("APIs only Kafka advertises (key vMin-vMax): "
                        + ", ".join(f"{k['ApiKey']} v{k['MinVersion']}-{k['MaxVersion']}" for k in only))
        kafka["ApiKeys"] = [k for k in kafka["ApiKeys"] if k["ApiKey"] in ours]
    if step.startswith("list-config-resources"):
        # Kafka lists topics in the order of its hash map: the order carries no meaning.
        for r in (ketch, kafka):
            if isinstance((r or {}).get("ConfigResources"), list):
                r["ConfigResources"].sort(key=lambda c: (c.get("Type", 0), c.get("Name", "")))
    for res in (ketch or {}).get("Resources") or [], (kafka or {}).get("Resources") or []:
        # DescribeConfigs of the broker: Ketch's own ketch.* settings are left out, and the
        # harness's ports and paths are not compared.
        for r in res:
            if r.get("ResourceType") == 4 and isinstance(r.get("Configs"), list):
                r["Configs"] = [c for c in r["Configs"] if not c.get("Name", "").startswith(KETCH_ONLY_CONFIG_PREFIX)]
                for c in r["Configs"]:
                    if c.get("Name") in HARNESS_BROKER_CONFIGS:
                        c["Value"] = c["Source"] = "<harness>"
                        c["ConfigSynonyms"] = "<harness>" if c.get("ConfigSynonyms") else None


def compare_runs(ketch_lines: list[dict], kafka_lines: list[dict], now: int):
    """Returns (differences, info): differences are (step, api/version, path, ketch, kafka)."""
    diffs, info = [], []
    ka = {(l["step"], l["version"]): l for l in kafka_lines}
    kk = {(l["step"], l["version"]): l for l in ketch_lines}
    for key in list(ka) + [k for k in kk if k not in ka]:
        step, version = key
        a, k = ka.get(key), kk.get(key)
        api = f"{(a or k)['api']} v{version}"
        if a is None or k is None:
            diffs.append((step, api, "", "<step missing>" if k is None else "ran", "<step missing>" if a is None else "ran"))
            continue
        if "skipped" in k and "skipped" not in a:
            # an admin API Ketch does not serve yet (go/admindiff optStep): compared once it does
            info.append(f"not advertised by Ketch, not compared: {step} ({api})")
            continue
        if "skipped" in a or "skipped" in k or "error" in a or "error" in k:
            if (a.get("error"), a.get("skipped")) != (k.get("error"), k.get("skipped")):
                diffs.append((step, api, "error", k.get("error") or k.get("skipped") or "<answered>",
                              a.get("error") or a.get("skipped") or "<answered>"))
            continue
        kr, ar = normalize(k["response"], now), normalize(a["response"], now)
        special_cases(step, kr, ar, info)
        for path, x, y in diff(kr, ar):
            diffs.append((step, api, path or ".", x, y))
    return diffs, info


def _glob(pattern: str) -> re.Pattern:
    """Only '*' is special (paths contain brackets)."""
    return re.compile(".*".join(re.escape(p) for p in pattern.split("*")) + r"\Z")


def is_known(d) -> str | None:
    for step_glob, path_glob, reason in KNOWN_DIFFERENCES:
        if _glob(step_glob).match(d[0]) and _glob(path_glob).match(d[2]):
            return reason
    return None


_KEYED = re.compile(r"\[(\w+)=([^\]]*)\]")


def collapse(diffs, threshold: int = 4):
    """Merges differences that repeat over the entries of one list (the same field of many
    configs, many missing configs) into one, listing the entries' names."""
    groups: dict[tuple, list] = {}
    order = []
    for i, d in enumerate(diffs):
        step, api, path, k, a = d
        segs = list(_KEYED.finditer(path))
        if not segs:
            key = ("single", i)
        else:
            last = segs[-1]
            general = path[:last.start()] + f"[{last.group(1)}=*]" + path[last.end():]
            key = (step, api, general, json.dumps(k) if not str(k).startswith("{") else "<entry>",
                   "<missing>" if a == "<missing>" else "")
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(d)
    out = []
    for key in order:
        ds = groups[key]
        if len(ds) < threshold:
            out += ds
            continue
        names = [_KEYED.findall(d[2])[-1][1] for d in ds]
        step, api, general = key[0], key[1], key[2]
        sample_k, sample_a = ds[0][3], ds[0][4]
        kafka_val = sample_a if key[4] else f"(e.g. {_brief(sample_a)})"
        ketch_val = sample_k if sample_k == "<missing>" or not str(sample_k).startswith("{") else "(entries)"
        out.append((step, api, f"{general} for {len(ds)} entries: {', '.join(names)}", ketch_val, kafka_val))
    return out


def format_diffs(diffs) -> str:
    lines = []
    for step, api, path, k, a in diffs:
        lines.append(f"  {api:34} {step:48} {path}\n      ketch: {_brief(k)}\n      kafka: {_brief(a)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------------------------


def parse_output(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def check_versions(outputs: dict[str, list[dict]]) -> list[str]:
    """Every pinned version must be within what both brokers advertise (except the optional
    steps Ketch skipped: APIs it does not serve yet)."""
    advertised = {t: _advertised(lines) for t, lines in outputs.items()}
    skipped = {l["step"] for l in outputs["ketch"] if "skipped" in l}
    problems = []
    for l in outputs["kafka"]:
        if l["api"] == "ApiVersions" or l["step"] in skipped:
            continue
        for target, table in advertised.items():
            rng = table.get(l["key"])
            if rng is None or not rng[0] <= l["version"] <= rng[1]:
                problems.append(f"{l['step']}: {l['api']} v{l['version']} not advertised by {target} ({rng})")
    return problems


def _advertised(lines: list[dict]) -> dict[int, tuple[int, int]]:
    for l in lines:
        if l["step"] == "api-versions" and l["version"] == 3 and "response" in l:
            return {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in l["response"]["ApiKeys"]}
    return {}


# Kafka's server.properties (written by conftest's KafkaBroker) that Ketch gets too, so that
# both brokers run with the same settings; the others hold Kafka's own ports and paths.
NOT_FOR_KETCH = HARNESS_BROKER_CONFIGS


def kafka_settings(kafka: KafkaBroker) -> dict[str, str]:
    out = {}
    for line in kafka.props_path.read_text().splitlines():
        k, sep, v = line.partition("=")
        if sep and not line.startswith("#") and k.strip() not in NOT_FOR_KETCH:
            out[k.strip()] = v.strip()
    return out


@pytest.fixture
def both_brokers(tmp_path, request):
    """Real Kafka, then Ketch with the same settings; both closed at the end."""
    kafka = KafkaBroker(tmp_path / "kafka")
    brokers = [kafka]
    request.node._compat_brokers = brokers  # their logs are attached to a failure
    try:
        try:
            kafka.start()
            ketch = KetchBroker(tmp_path / "ketch", kafka_settings(kafka))
            brokers.insert(0, ketch)
            ketch.start()
        except BrokerStartError as e:
            pytest.fail(str(e), pytrace=False)
        yield ketch, kafka
    finally:
        for b in brokers:
            b.close()


def analyze(outputs: dict[str, list[dict]], now: int) -> tuple[list[str], str]:
    """(summary lines, failure report or "")."""
    problems = check_versions(outputs)
    diffs, info = compare_runs(outputs["ketch"], outputs["kafka"], now)
    known = [(d, r) for d in diffs if (r := is_known(d))]
    real = collapse([d for d in diffs if not is_known(d)])
    summary = [f"{len(outputs['kafka'])} requests compared; {len(real)} differences, {len(known)} known"]
    summary += ["info: " + line for line in info]
    summary += [f"known: {d[1]} {d[0]} {d[2]} ({reason})" for d, reason in known]
    report = []
    if problems:
        report.append("request versions not advertised by both brokers:\n  " + "\n  ".join(problems))
    if real:
        report.append(f"{len(real)} differences between Ketch and Kafka 4.1 "
                      f"(API version, step, JSON path; ketch value; kafka value):\n" + format_diffs(real))
    return summary, "\n\n".join(report)


def test_admin_responses_match_kafka(both_brokers, tmp_path):
    ketch, kafka = both_brokers
    binary = go_build("admindiff")
    outputs = {}
    for b in (ketch, kafka):
        r = run_logged([binary, "-brokers", b.bootstrap], timeout=RUN_TIMEOUT, what=f"admindiff against {b.target}")
        (tmp_path / f"{b.target}.jsonl").write_text(r.stdout)  # raw responses, kept for a look by hand
        outputs[b.target] = parse_output(r.stdout)
    summary, report = analyze(outputs, _now_ms())
    print("\n".join(summary))
    if report:
        pytest.fail(report, pytrace=False)
