//! `plimsoll init`: a starting contract in language 2 for a service Plimsoll knows nothing of,
//! from its routes (`--route`) or its OpenAPI document (`--openapi`). What the routes say is
//! written as values: each pool's routes, and the request the checker sends to hold one of its
//! workers. What they cannot say (how many workers, the queue, the refusal's status, how long
//! the slow request takes) is a placeholder ([`plimsoll_spec::draft`]): a `"TODO: …"` string the
//! loader refuses and `plimsoll contract lint` lists with its line, so that a draft is judged by
//! nobody until a person has decided every value. The tolerances are the embedded contract's.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;

use plimsoll_spec::Contract;
use plimsoll_spec::draft::PLACEHOLDER;
use serde_json::Value;

use crate::args::InitArgs;

/// The largest body a recipe sends, as the loader bounds it (`hold.request.body`).
const MAX_BODY: usize = 64 * 1024;

/// The largest OpenAPI document read: far more than any service's, and a bound on a hostile one.
const MAX_OPENAPI_BYTES: u64 = 16 << 20;

/// The methods an OpenAPI path item may hold operations under, in the order it lists them.
const OPENAPI_METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Runs `plimsoll init`; returns the exit code: 0 the draft written, 2 an input could not be
/// read or used, or the output exists (without `--force`), each said in one line on stderr.
pub(crate) fn run(args: InitArgs) -> u8 {
    match draft(&args).and_then(|text| write(&args, &text)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("plimsoll init: {e}");
            2
        }
    }
}

/// The draft's text, from the routes or the OpenAPI document.
fn draft(args: &InitArgs) -> Result<String, String> {
    let (service, pools) = match &args.openapi {
        Some(path) => from_openapi(path)?,
        None => (Service::default(), from_routes(args)?),
    };
    let pools = match &args.group {
        Some(group) => vec![grouped(group, pools)?],
        None => pools,
    };
    let name = args.name.clone().or(service.name);
    Ok(render(&args.schema, name, service.title, &pools))
}

/// Writes the draft to `--output` (never over a file without `--force`) or stdout.
fn write(args: &InitArgs, text: &str) -> Result<(), String> {
    let Some(path) = &args.output else {
        print!("{text}");
        return Ok(());
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if args.force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            format!("{} exists; --force overwrites it", path.display())
        } else {
            format!("cannot write {}: {e}", path.display())
        }
    })?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!(
        "plimsoll init: wrote {}; fill in every \"{PLACEHOLDER} …\" value, then `plimsoll contract lint {}`",
        path.display(),
        path.display()
    );
    Ok(())
}

/// What the OpenAPI document says of the service as a whole.
#[derive(Debug, Default)]
struct Service {
    /// `[contract].name`: the document's title, as an id.
    name: Option<String>,
    /// `[contract].title`: the document's title.
    title: Option<String>,
}

/// A pool of the draft: its id, its routes and the request that holds one of its workers.
#[derive(Debug)]
struct PoolDraft {
    id: String,
    title: String,
    routes: Vec<(String, String)>,
    hold: Hold,
}

/// The request the checker sends to hold a worker: what the routes and examples say of it.
#[derive(Debug)]
struct Hold {
    method: String,
    /// The path to send; `Err` with the pattern when a `{param}` has no example to fill it.
    path: Result<String, String>,
    headers: BTreeMap<String, String>,
    /// The body: `Err` saying why there is none to write when one is wanted.
    body: Option<Result<String, String>>,
    /// The success status, when the document names one.
    status: Option<u16>,
}

/// One pool per `--route`, each request with `--body`.
fn from_routes(args: &InitArgs) -> Result<Vec<PoolDraft>, String> {
    let body = match &args.body {
        Some(path) => Some(Ok(read_body(path)?)),
        None => None,
    };
    let mut ids = BTreeSet::new();
    args.routes
        .iter()
        .map(|route| {
            let (method, path) = parse_route(route)?;
            let hold = Hold {
                method: method.clone(),
                path: concrete(&path),
                headers: BTreeMap::new(),
                body: body.clone(),
                status: None,
            };
            Ok(PoolDraft {
                id: unique_id(&mut ids, &method, &path),
                title: format!("{method} {path}"),
                routes: vec![(method, path)],
                hold,
            })
        })
        .collect()
}

/// `'METHOD PATH'`: an upper-case method and a path starting with `/`.
fn parse_route(route: &str) -> Result<(String, String), String> {
    let words: Vec<&str> = route.split_whitespace().collect();
    match words.as_slice() {
        [method, path]
            if !method.is_empty()
                && method.bytes().all(|b| b.is_ascii_uppercase())
                && path.starts_with('/') =>
        {
            Ok(((*method).to_owned(), (*path).to_owned()))
        }
        _ => Err(format!(
            "--route {route:?} is not 'METHOD PATH' (an upper-case method, a path starting with `/`: 'GET /v1/items/{{id}}')"
        )),
    }
}

/// A path with no `{param}` is sent as it is; one with a parameter needs a value to send.
fn concrete(path: &str) -> Result<String, String> {
    if path.contains('{') {
        Err(path.to_owned())
    } else {
        Ok(path.to_owned())
    }
}

/// A pool id from a route, `get_v1_items_id`, made unique among `ids`.
fn unique_id(ids: &mut BTreeSet<String>, method: &str, path: &str) -> String {
    let raw = format!("{method} {path}").to_ascii_lowercase();
    let mut base = String::new();
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() {
            base.push(c);
        } else if !base.ends_with('_') {
            base.push('_');
        }
    }
    let base = base.trim_end_matches('_').to_owned();
    let mut id = base.clone();
    let mut n = 2;
    while !ids.insert(id.clone()) {
        id = format!("{base}_{n}");
        n += 1;
    }
    id
}

/// Every pool's routes in one pool, held by the first route's request.
fn grouped(group: &str, pools: Vec<PoolDraft>) -> Result<PoolDraft, String> {
    let ok = !group.is_empty()
        && group
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok {
        return Err(format!(
            "--group {group:?} is no pool id (letters, digits, `_` and `-`)"
        ));
    }
    let mut pools = pools.into_iter();
    let first = pools
        .next()
        .ok_or_else(|| "nothing to group: no route".to_owned())?;
    let mut routes = first.routes;
    for pool in pools {
        routes.extend(pool.routes);
    }
    Ok(PoolDraft {
        id: group.to_owned(),
        title: group.to_owned(),
        routes,
        hold: first.hold,
    })
}

/// A recipe body: UTF-8 text of at most [`MAX_BODY`] bytes.
fn read_body(path: &Path) -> Result<String, String> {
    let bytes = read_bounded(path, MAX_BODY as u64)?;
    if bytes.len() > MAX_BODY {
        return Err(format!(
            "{}: a recipe's body is at most {MAX_BODY} bytes",
            path.display()
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        format!(
            "{}: a recipe's body is text (UTF-8); this file is not",
            path.display()
        )
    })
}

/// At most `limit + 1` bytes of a file: one more than allowed says it is too large.
fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(bytes)
}

/// One pool per operation of an OpenAPI 3.x document (JSON), each request from the operation's
/// examples: its path parameters', its request body's, its first success status.
fn from_openapi(path: &Path) -> Result<(Service, Vec<PoolDraft>), String> {
    let bytes = read_bounded(path, MAX_OPENAPI_BYTES)?;
    if bytes.len() as u64 > MAX_OPENAPI_BYTES {
        return Err(format!(
            "{}: larger than {MAX_OPENAPI_BYTES} bytes",
            path.display()
        ));
    }
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "{}: not JSON ({e}); this build reads OpenAPI as JSON only (convert YAML first, `yq -o json`)",
            path.display()
        )
    })?;
    let version = doc["openapi"].as_str().unwrap_or_default();
    if !version.starts_with("3.") {
        return Err(format!(
            "{}: not an OpenAPI 3.x document (its `openapi` is {:?}; Swagger 2.0 is not read)",
            path.display(),
            doc["openapi"]
        ));
    }
    let title = doc["info"]["title"].as_str().map(str::to_owned);
    let service = Service {
        name: title.as_deref().map(slug).filter(|s| !s.is_empty()),
        title,
    };
    let mut ids = BTreeSet::new();
    let mut pools = Vec::new();
    for (pattern, item) in doc["paths"].as_object().into_iter().flatten() {
        let item = resolve(&doc, item);
        for method in OPENAPI_METHODS {
            let Some(op) = item.get(method) else { continue };
            let op = resolve(&doc, op);
            let method = method.to_ascii_uppercase();
            let hold = Hold {
                method: method.clone(),
                path: example_path(&doc, pattern, item, op),
                headers: BTreeMap::new(),
                body: None,
                status: success_status(op),
            };
            let hold = with_example_body(&doc, op, hold);
            pools.push(PoolDraft {
                id: unique_id(&mut ids, &method, pattern),
                title: op["summary"]
                    .as_str()
                    .or(op["operationId"].as_str())
                    .map_or_else(|| format!("{method} {pattern}"), str::to_owned),
                routes: vec![(method, pattern.clone())],
                hold,
            });
        }
    }
    if pools.is_empty() {
        return Err(format!(
            "{}: no operation under `paths`: nothing to write a pool for",
            path.display()
        ));
    }
    Ok((service, pools))
}

/// A local `$ref` (`#/components/...`) followed to what it names (a few hops at most); any other
/// value as it is.
fn resolve<'a>(doc: &'a Value, mut value: &'a Value) -> &'a Value {
    for _ in 0..8 {
        let Some(pointer) = value["$ref"].as_str().and_then(|r| r.strip_prefix('#')) else {
            break;
        };
        match doc.pointer(pointer) {
            Some(target) => value = target,
            None => break,
        }
    }
    value
}

/// The operation's path with each `{param}` filled from its parameter's example; the pattern
/// when one has none.
fn example_path(doc: &Value, pattern: &str, item: &Value, op: &Value) -> Result<String, String> {
    let mut examples = BTreeMap::new();
    for params in [&item["parameters"], &op["parameters"]] {
        for param in params.as_array().into_iter().flatten() {
            let param = resolve(doc, param);
            if param["in"] != "path" {
                continue;
            }
            let (Some(name), Some(example)) = (param["name"].as_str(), example_of(doc, param))
            else {
                continue;
            };
            let text = match example {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            examples.insert(name.to_owned(), text);
        }
    }
    let mut path = pattern.to_owned();
    for (name, value) in &examples {
        path = path.replace(&format!("{{{name}}}"), value);
    }
    if path.contains('{') || !path.bytes().all(|b| b.is_ascii_graphic()) {
        Err(pattern.to_owned())
    } else {
        Ok(path)
    }
}

/// An example of a parameter or media type: its `example`, its first `examples` entry's
/// `value`, or its schema's `example`.
fn example_of<'a>(doc: &'a Value, holder: &'a Value) -> Option<&'a Value> {
    if let Some(example) = holder.get("example") {
        return Some(example);
    }
    if let Some((_, first)) = holder["examples"].as_object().and_then(|e| e.iter().next())
        && let Some(value) = resolve(doc, first).get("value")
    {
        return Some(value);
    }
    resolve(doc, &holder["schema"]).get("example")
}

/// The request body of the operation's first media type with an example, and its
/// `Content-Type`; a placeholder for an operation that takes a body and shows none.
fn with_example_body(doc: &Value, op: &Value, mut hold: Hold) -> Hold {
    let body = resolve(doc, &op["requestBody"]);
    let Some(content) = body["content"].as_object() else {
        return hold;
    };
    let example = content
        .iter()
        .find_map(|(media, m)| example_of(doc, resolve(doc, m)).map(|e| (media, e)));
    let Some((media, example)) = example else {
        let media = content.keys().next().cloned().unwrap_or_default();
        if !media.is_empty() {
            hold.headers.insert("Content-Type".into(), media.clone());
        }
        hold.body = Some(Err(format!(
            "a request body ({media}) for this operation: the document shows no example"
        )));
        return hold;
    };
    let text = match example {
        Value::String(s) if !media.contains("json") => s.clone(),
        other => other.to_string(),
    };
    hold.headers.insert("Content-Type".into(), media.clone());
    hold.body = Some(if text.len() > MAX_BODY {
        Err(format!(
            "a request body of at most {MAX_BODY} bytes (the example is {} bytes)",
            text.len()
        ))
    } else {
        Ok(text)
    });
    hold
}

/// The operation's first success status (`200`…`299`) among its responses.
fn success_status(op: &Value) -> Option<u16> {
    op["responses"]
        .as_object()?
        .keys()
        .filter_map(|k| k.parse::<u16>().ok())
        .find(|s| (200..=299).contains(s))
}

/// A title as an id: lower case, words joined by `-`.
fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.to_ascii_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// A TOML string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A placeholder: a TOML string the loader refuses, saying what to put there.
fn todo(what: &str) -> String {
    quoted(&format!("{PLACEHOLDER} {what}"))
}

/// The draft's text: the header comments, `[contract]`, each pool with its refusal, and the
/// embedded contract's tolerances.
fn render(
    schema: &str,
    name: Option<String>,
    title: Option<String>,
    pools: &[PoolDraft],
) -> String {
    let mut out = format!(
        "#:schema {schema}
# A starting contract written by `plimsoll init` (contract language {language}). Every value it
# could not know is a placeholder: a string starting with \"{PLACEHOLDER}\" that says what to measure
# or decide. Replace each with its value (a number where the field takes a number), then
#
#   plimsoll contract lint THIS_FILE       # lists each placeholder left, and each broken rule
#   plimsoll check --contract THIS_FILE --target URL
#
# `check` refuses the file while a placeholder is left. Clauses the contract gives nothing to
# judge are reported not applicable, with the reason: declare more to have more judged.
# The `#:schema` line points an editor at the language's JSON Schema, for completion and checks
# as you type: spec/schemas/contract.schema.json of the Plimsoll repository (`init --schema`).
language = {language}

[contract]
name = {name}
title = {title}
version = \"0.1.0\"
summary = {summary}
",
        language = plimsoll_spec::model::LANGUAGE,
        name = name.map_or_else(
            || todo("a short stable name for this contract (`orders-api`)"),
            |n| quoted(&n)
        ),
        title = title.map_or_else(
            || todo("the contract's title, as its docs head it"),
            |t| quoted(&t)
        ),
        summary = todo("one sentence on what the contract promises (`At most 4 searches run at once; the next waits, up to 8`)"),
    );
    for pool in pools {
        render_pool(&mut out, pool);
    }
    let tolerances = toml::to_string(&Contract::embedded().tolerances)
        .expect("the embedded tolerances serialize");
    out.push_str(&format!(
        "
# The slack of the checker's timing judgements: the embedded contract's, a place to start.
[tolerances]
{tolerances}"
    ));
    out
}

fn render_pool(out: &mut String, pool: &PoolDraft) {
    let id = &pool.id;
    let routes: Vec<String> = pool
        .routes
        .iter()
        .map(|(method, path)| format!("{{ method = {}, path = {} }}", quoted(method), quoted(path)))
        .collect();
    out.push_str(&format!(
        "
[pools.{id}]
title = {title}
routes = [{routes}]
# T1: the most requests of this pool the service runs at once (its worker, thread or connection
# limit).
workers = {workers}
# T2: how many more may wait for a worker (0: refused at once; \"unbounded\": never refused, and
# then drop `refusal`), and the order they start in.
queue.capacity = {capacity}
queue.order = {order}
# What a request gets when every worker and queue place is taken: [refusals.{id}] below.
refusal = {refusal}
# Optional, each judged once declared: deadline_ms (B1), memory_cap_mb (B2) with
# [[pools.{id}.over_cap]] requests it refuses, cancellation = {{ stop_within_ms = …,
# checkpoint_interval_ms = … }} (B3, with a dependency hold), counts = \"connections\" (T1), key =
# \"client_address\" or {{ header = \"X-Api-Key\" }} (T1), [[pools.{id}.bad_requests]] (F2), and
# the service's own series as [pools.{id}.metrics] (path, busy, queued, limit, refused: T1).

# How the checker keeps one worker busy on purpose: a request the service answers slowly, with a
# worker held throughout, and the least time that takes. A service that honours the hold hook
# (the plimsoll-tower layer, the plimsoll_asgi middleware) replaces `at_least_ms` with
# `hook = {{ header = \"X-Plimsoll-Hook\", stage = \"{id}\" }}` (the stage: any lowercase name
# for where it holds), and the checker picks the time; one that calls a dependency for each
# request replaces it with `dependency = {{ env = \"ITS_URL_VARIABLE\", listen =
# \"127.0.0.1:18093\" }}`, is started with that URL, and the checker plays the dependency. A route
# with none of these has no hold: delete this table and its request, and the timing clauses are
# not applicable to it.
[pools.{id}.hold]
at_least_ms = {at_least}

[pools.{id}.hold.request]
method = {method}
path = {path}
",
        title = quoted(&pool.title),
        routes = routes.join(", "),
        workers = todo("how many requests of this pool run at once (a number, at least 1)"),
        capacity = todo("how many requests may wait (a number, or \"unbounded\")"),
        order = todo("\"fifo\", \"lifo\" or \"unordered\""),
        refusal = quoted(id),
        at_least = todo("the least milliseconds this request takes (a number)"),
        method = quoted(&pool.hold.method),
        path = match &pool.hold.path {
            Ok(path) => quoted(path),
            Err(pattern) => todo(&format!(
                "a path of {pattern} to send, each {{param}} filled in"
            )),
        },
    ));
    if let Some(body) = &pool.hold.body {
        let body = match body {
            Ok(text) => quoted(text),
            Err(why) => todo(why),
        };
        out.push_str(&format!("body = {body}\n"));
    }
    if let Some(status) = pool.hold.status {
        out.push_str(&format!("status = {status}\n"));
    }
    if !pool.hold.headers.is_empty() {
        let headers: Vec<String> = pool
            .hold
            .headers
            .iter()
            .map(|(k, v)| format!("{} = {}", quoted(k), quoted(v)))
            .collect();
        out.push_str(&format!("headers = {{ {} }}\n", headers.join(", ")));
    }
    out.push_str(&format!(
        "
[refusals.{id}]
# The status a refused request gets (a client or server error), or instead `error = CODE`
# naming an entry of an [[errors]] table.
status = {status}
",
        status = todo("the status of a refusal (503, 429, …)"),
    ));
}
