//! The pool a run loads, as its contract declares it: which of the contract's pools, the
//! request every attempt sends and the hook that holds its worker, the answers it may get, and
//! the series the target reports it in.
//!
//! The reference contract's digitize pool is one such pool (its lightest request, the reference
//! hook, the `plimsoll_*` gauges); a pool of any other contract is another, read from its
//! declaration: its hold recipe and hook, its refusal and hint, its own series. The profiles
//! draw a hold for every attempt and ask for it through a hook; a pool held by a slow request
//! (a proxy in front of a slow upstream) holds every attempt for the request's own time
//! instead, and one held by a dependency the checker plays holds every attempt for the
//! profile's nominal hold, the dependency answering every call that late (a call carries
//! nothing that says which attempt it serves, so the hold cannot be drawn per attempt).

use std::collections::BTreeSet;
use std::ops::RangeInclusive;
use std::time::Duration;

use plimsoll_conformance::checks::refusal::pool_allowed;
use plimsoll_conformance::session::Fatal;
use plimsoll_spec::model::{DependencyHold, PoolSpec};
use plimsoll_spec::{Contract, Pool};

use super::run::{Hold, Hook, RequestTemplate};
use super::scrape::Gauges;

/// The pool a run loads, resolved once from the contract.
#[derive(Debug, Clone)]
pub(crate) struct LoadedPool {
    /// Its key in `[pools]`.
    pub name: String,
    /// Its declaration.
    pub spec: PoolSpec,
    /// The request every attempt sends, and how its answer is read.
    pub template: RequestTemplate,
    /// A slow request's own hold (`hold.at_least_ms`), or the hold the played dependency gives
    /// every call: every attempt holds this long, whatever the profile would draw. None: the
    /// hook holds what the profile asks.
    pub own_hold_ms: Option<u64>,
    /// The dependency the checker plays for the run, answering every call after
    /// [`own_hold_ms`](Self::own_hold_ms), when the pool holds by one.
    pub dependency: Option<DependencyHold>,
    /// The series the target reports the pool in.
    pub gauges: Gauges,
    /// Every status an attempt may be answered with.
    pub documented: BTreeSet<u16>,
    /// The header a refusal's hint travels in and the delays it may advertise; None: the
    /// refusal declares no hint.
    pub hint: Option<(String, RangeInclusive<u64>)>,
}

impl LoadedPool {
    /// The pool `asked` (`--pool`), or the one the contract leaves no doubt about: the
    /// reference's digitize pool, or the only pool of another contract it declares a hold for.
    /// `nominal_hold_ms` is the profile's hold, which a played dependency gives every call.
    pub(crate) fn choose(
        contract: &Contract,
        asked: Option<&str>,
        nominal_hold_ms: u64,
    ) -> Result<LoadedPool, Fatal> {
        let name = match asked {
            Some(name) if contract.pools.contains_key(name) => name.to_owned(),
            Some(name) => {
                return Err(Fatal::Usage(format!(
                    "--pool {name}: the contract `{}` declares no such pool (its pools: {})",
                    contract.contract.name,
                    names(contract.pools.keys())
                )));
            }
            None if contract.is_reference() => Pool::Digitize.as_str().to_owned(),
            None => only_held(contract)?,
        };
        let spec = &contract.pools[&name];
        match Pool::ALL.into_iter().find(|p| p.as_str() == name) {
            Some(Pool::Digitize) if contract.is_reference() => Ok(reference(contract)),
            _ => declared(contract, (&name, spec), nominal_hold_ms).map_err(|why| {
                Fatal::Usage(format!(
                    "pool `{name}` of the contract `{}` cannot be loaded: {why}",
                    contract.contract.name
                ))
            }),
        }
    }

    /// How soon the work of a client that went away stops (B3), when the pool promises it; 0
    /// when it does not (its requests then end within their hold).
    pub(crate) fn stop_within(&self) -> Duration {
        let ms = self
            .spec
            .cancellation
            .as_ref()
            .map_or(0, |c| c.stop_within_ms);
        Duration::from_millis(ms)
    }

    /// The hold a profile asks for, as the pool can give it: drawn (through its hook), or the
    /// slow request's own, for every attempt.
    pub(crate) fn hold(&self, asked: Hold) -> Hold {
        match self.own_hold_ms {
            Some(ms) => Hold::Fixed { ms },
            None => asked,
        }
    }

    /// A fixed hold of `asked_ms` as the pool can give it ([`LoadedPool::hold`]).
    pub(crate) fn fixed_hold_ms(&self, asked_ms: u64) -> u64 {
        self.own_hold_ms.unwrap_or(asked_ms)
    }

    /// The queue's places: how many requests may wait for a worker (a loaded pool's queue is
    /// bounded: [`declared`] refuses another).
    pub(crate) fn places(&self) -> u32 {
        self.spec.queue.capacity.places().unwrap_or(0)
    }
}

/// The only pool of `contract` it declares a hold for, or why there is not exactly one.
fn only_held(contract: &Contract) -> Result<String, Fatal> {
    let loadable: Vec<&String> = (contract.pools.iter())
        .filter(|(_, p)| p.hold.is_some())
        .map(|(name, _)| name)
        .collect();
    match loadable.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(Fatal::Usage(format!(
            "the contract `{}` declares no `hold` for any pool (a hook, a slow request or a \
             dependency): plimsoll load holds each request through one; its pools are judged by \
             `plimsoll check` (T1-T6)",
            contract.contract.name
        ))),
        several => Err(Fatal::Usage(format!(
            "the contract `{}` declares a hold for several pools; name the one to load with \
             --pool ({})",
            contract.contract.name,
            names(several.iter().copied())
        ))),
    }
}

fn names<'a>(names: impl Iterator<Item = &'a String>) -> String {
    names.map(String::as_str).collect::<Vec<_>>().join(", ")
}

/// The reference pipeline's digitize pool: its lightest request, the reference hook, the
/// `plimsoll_*` gauges, the statuses its OpenAPI operation lists.
fn reference(contract: &Contract) -> LoadedPool {
    let api = &contract.api().digitize;
    let openapi = plimsoll_spec::render::openapi(contract);
    let documented = openapi["paths"][api.path.as_str()]["post"]["responses"]
        .as_object()
        .map(|m| m.keys().filter_map(|k| k.parse().ok()).collect())
        .unwrap_or_default();
    let spec = contract.pool_spec(Pool::Digitize).clone();
    let refusal = contract.refusal(Pool::Digitize);
    LoadedPool {
        name: Pool::Digitize.as_str().to_owned(),
        template: lightest_request(contract),
        own_hold_ms: None,
        dependency: None,
        gauges: Gauges::reference(&contract.api().metrics.path, Pool::Digitize),
        documented,
        hint: refusal.and_then(|r| {
            Some((
                r.hint.as_ref()?.header().to_owned(),
                pool_allowed(r, &spec)?,
            ))
        }),
        spec,
    }
}

/// The lightest valid digitize request: smallest design, coarsest fill, fewest colours, so
/// the request's time is its hold and the pipeline's own cost stays small.
fn lightest_request(contract: &Contract) -> RequestTemplate {
    let api = &contract.api().digitize;
    let p = &api.params;
    let observability = contract.observability();
    let refusal = contract.refusal(Pool::Digitize);
    RequestTemplate {
        name: Pool::Digitize.as_str().to_owned(),
        method: reqwest::Method::POST,
        path: format!(
            "{}?width_mm={}&density_mm={}&colors={}",
            api.path, p.width_mm.min, p.density_mm.max, p.colors.min
        ),
        headers: vec![("content-type".into(), api.content_types[0].clone())],
        body: plimsoll_conformance::remote::sample_png().into(),
        hook: Some(Hook {
            header: contract.hooks().header.clone(),
            stage: contract.load.hold_stage.as_str().to_owned(),
        }),
        ok_status: 200,
        refusal: refusal.and_then(|r| contract.refusal_answer(r)),
        request_id_header: Some(observability.request_id_header.clone()),
        server_timing: Some((
            observability.server_timing_header.clone(),
            observability.server_timing_metrics.clone(),
        )),
        hint_header: refusal.and_then(|r| Some(r.hint.as_ref()?.header().to_owned())),
    }
}

/// A pool of any contract, from its declaration: its hold recipe sent with its hook (or, slow
/// or held by its dependency, for a fixed time), its refusal and hint, its own series; or why it
/// cannot be loaded.
fn declared(
    contract: &Contract,
    (name, spec): (&str, &PoolSpec),
    nominal_hold_ms: u64,
) -> Result<LoadedPool, String> {
    let hold = spec
        .hold
        .as_ref()
        .ok_or("it declares no `hold` (a request its hook holds)")?;
    // Validation leaves exactly one way to hold; a hook wins where several are written.
    let (own_hold_ms, dependency) = match (&hold.hook, hold.at_least_ms, &hold.dependency) {
        (Some(_), _, _) => (None, None),
        (None, Some(ms), _) => (Some(ms), None),
        (None, None, Some(d)) => (Some(nominal_hold_ms), Some(d.clone())),
        (None, None, None) => return Err("its `hold` says no way to hold a worker".into()),
    };
    if spec.queue.capacity.places().is_none() {
        return Err(
            "its queue has no bound, and the profiles size their waves and their \
                    prediction by workers + queue places"
                .into(),
        );
    }
    let recipe = &hold.request;
    let method = reqwest::Method::from_bytes(recipe.method.as_bytes()).map_err(|_| {
        format!(
            "its hold's method `{}` is not an HTTP method",
            recipe.method
        )
    })?;
    let body = recipe.body().map_err(|e| format!("its hold's {e}"))?;
    let refusal = spec.refusal.as_ref().and_then(|r| contract.refusals.get(r));
    let answer = refusal.and_then(|r| contract.refusal_answer(r));
    let timeout_answer = (spec.queue.timeout_answer.as_ref())
        .and_then(|r| contract.refusals.get(r))
        .and_then(|r| contract.refusal_status(r));
    let documented = [
        Some(recipe.status),
        answer.as_ref().map(|a| a.status),
        timeout_answer,
    ];
    let hint =
        refusal.and_then(|r| Some((r.hint.as_ref()?.header().to_owned(), pool_allowed(r, spec)?)));
    Ok(LoadedPool {
        name: name.to_owned(),
        template: RequestTemplate {
            name: name.to_owned(),
            method,
            path: recipe.path.clone(),
            headers: recipe.headers.clone().into_iter().collect(),
            body: body.into_owned().into(),
            hook: hold.hook.as_ref().map(|hook| Hook {
                header: hook.header.clone(),
                stage: hook.stage.as_str().to_owned(),
            }),
            ok_status: recipe.status,
            refusal: answer,
            request_id_header: None,
            server_timing: (contract.server_timing.as_ref())
                .map(|t| (t.header.clone(), vec![t.queue.clone(), t.run.clone()])),
            hint_header: hint.as_ref().map(|(header, _)| header.clone()),
        },
        own_hold_ms,
        dependency,
        gauges: Gauges::declared(spec.metrics.as_ref()),
        documented: documented.into_iter().flatten().collect(),
        hint,
        spec: spec.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An example's contract, read from the repository.
    fn example(name: &str) -> Contract {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        Contract::from_file(&root.join(name).join("contract.toml")).unwrap()
    }

    fn second() -> Contract {
        example("rust-service")
    }

    fn refused(contract: &Contract, asked: Option<&str>) -> String {
        match LoadedPool::choose(contract, asked, 300) {
            Err(Fatal::Usage(why)) => why,
            other => panic!("{asked:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn the_reference_loads_its_digitize_pool_by_its_own_surface() {
        let c = Contract::embedded();
        let pool = LoadedPool::choose(c, None, 300).unwrap();
        assert_eq!(pool.name, "digitize");
        assert_eq!(pool.template.method, reqwest::Method::POST);
        assert_eq!(
            pool.template.hook.as_ref().unwrap().header,
            c.hooks().header
        );
        assert_eq!(pool.own_hold_ms, None);
        assert_eq!(
            pool.gauges,
            Gauges::reference(&c.api().metrics.path, Pool::Digitize)
        );
        let refusal = pool.template.refusal.as_ref().unwrap();
        assert_eq!(refusal.words(), "503 `overloaded`");
        assert!(pool.documented.contains(&503) && pool.documented.contains(&200));
    }

    #[test]
    fn another_contract_s_pool_is_loaded_by_its_declaration() {
        let c = second();
        let pool = LoadedPool::choose(&c, Some("search"), 300).unwrap();
        let t = &pool.template;
        assert_eq!((t.method.as_str(), t.path.as_str()), ("GET", "/search"));
        assert_eq!(
            (t.hook
                .as_ref()
                .map(|h| (h.header.as_str(), h.stage.as_str()))),
            Some(("X-Plimsoll-Hook", "search"))
        );
        assert_eq!(t.ok_status, 200);
        assert!(t.refused(429, br#"{"error":"too many searches"}"#));
        assert!(!t.refused(429, br#"{"error":"something else"}"#));
        assert_eq!(pool.hint, Some(("Retry-After".to_owned(), 1..=2)));
        assert_eq!(pool.documented, [200, 429].into());
        assert_eq!(pool.gauges.busy.as_ref().unwrap().name, "pool_busy");
        assert_eq!(pool.gauges.temp_files, None);
        // A queue timeout's answer is documented too (the reports' is their refusal, 503).
        let reports = LoadedPool::choose(&c, Some("reports"), 300).unwrap();
        assert_eq!(reports.documented, [200, 503].into());
        assert_eq!(reports.places(), 3);
    }

    #[test]
    fn a_pool_that_cannot_be_loaded_is_refused_with_why() {
        let c = second();
        let several = refused(&c, None);
        assert!(
            several.contains("--pool (lookup, reports, search, tenant)"),
            "{several}"
        );
        let unknown = refused(&c, Some("nope"));
        assert!(
            unknown.contains("declares no such pool (its pools: lookup, reports, search, tenant)"),
            "{unknown}"
        );
    }

    #[test]
    fn a_pool_held_by_its_dependency_holds_every_call_for_the_profile_s_hold() {
        let c = second();
        let lookup = LoadedPool::choose(&c, Some("lookup"), 250).unwrap();
        assert_eq!(lookup.own_hold_ms, Some(250));
        assert_eq!(lookup.template.hook, None);
        let played = lookup.dependency.as_ref().unwrap();
        assert_eq!(played.env, "LOOKUP_URL");
        assert_eq!(lookup.places(), 2);
    }

    #[test]
    fn a_proxy_s_pool_holds_every_attempt_for_its_slow_request_s_own_time() {
        let c = example("nginx");
        let pool = LoadedPool::choose(&c, None, 300).unwrap();
        assert_eq!((pool.name.as_str(), pool.own_hold_ms), ("slow", Some(500)));
        assert_eq!(pool.template.hook, None);
        let drawn = Hold::Exponential {
            mean_ms: 200.0,
            cap_ms: 2000,
        };
        assert!(matches!(pool.hold(drawn), Hold::Fixed { ms: 500 }));
        assert_eq!(pool.fixed_hold_ms(300), 500);
        let page = b"<html><head><title>503 Service Temporarily Unavailable</title></head></html>";
        assert!(pool.template.refused(503, page));
        assert!(
            !pool
                .template
                .refused(503, b"<title>502 Bad Gateway</title>")
        );
        assert_eq!(pool.documented, [200, 503].into());
        assert_eq!((pool.gauges.path.as_deref(), &pool.hint), (None, &None));
    }
}
