// deploy/k8s: every kustomization renders, every object validates against the Kubernetes
// schemas (npm kubernetes-models and its prometheus-operator and gateway-api packages, plus
// a check for fields the schemas do not define), and the manifests agree with the server:
// the containers pass no args, every MHLA_<FLAG> variable of their env names a flag of
// `mhla-server --help`, once, and a server started with the CPU overlay's env answers
// /health and exposes every metric the manifests read by name.
//
// usage: node test_manifests.mjs <bin dir> <work dir>
// Rendering: `kubectl kustomize` when kubectl is installed, compared object by object with
// this test's own renderer of the kustomize subset the manifests use (resources, JSON
// patches, images); without kubectl only the latter renders, and the test says so.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..", "..");
const K8S = path.join(ROOT, "deploy", "k8s");
const NODE_MODULES = path.join(HERE, "node_modules");
const [binDir, workDir] = process.argv.slice(2);
if (!binDir || !workDir) {
  console.error("usage: node test_manifests.mjs <bin dir> <work dir>");
  process.exit(2);
}

let failures = 0;
function check(cond, what) {
  console.log((cond ? "ok   " : "FAIL ") + what);
  if (!cond) failures++;
  return cond;
}

// ---- rendering ----

const readYaml = (p) => YAML.parseAllDocuments(fs.readFileSync(p, "utf8"))
  .map((d) => {
    if (d.errors.length) throw new Error(`${p}: ${d.errors[0].message}`);
    return d.toJS();
  })
  .filter((o) => o !== null);

function pointer(p) {
  return p.split("/").slice(1).map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function applyJsonPatch(obj, ops, where) {
  for (const op of ops) {
    const keys = pointer(op.path);
    const last = keys.pop();
    let parent = obj;
    for (const k of keys) {
      if (parent == null || !(k in parent)) throw new Error(`${where}: ${op.path}: no ${k}`);
      parent = parent[k];
    }
    if (op.op === "add") {
      if (Array.isArray(parent)) {
        if (last === "-") parent.push(op.value);
        else parent.splice(Number(last), 0, op.value);
      } else parent[last] = op.value;
    } else if (op.op === "replace") {
      if (!(last in parent)) throw new Error(`${where}: replace ${op.path}: nothing there`);
      parent[last] = op.value;
    } else if (op.op === "remove") {
      if (!(last in parent)) throw new Error(`${where}: remove ${op.path}: nothing there`);
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else {
      throw new Error(`${where}: JSON patch op '${op.op}' is not handled by this renderer`);
    }
  }
}

function podSpecs(o) {
  const t = o.spec && o.spec.template && o.spec.template.spec;
  return t ? [t] : [];
}

// The kustomize subset the manifests use; anything else is refused, never ignored.
function render(dir) {
  const k = YAML.parse(fs.readFileSync(path.join(dir, "kustomization.yaml"), "utf8"));
  for (const key of Object.keys(k)) {
    if (!["apiVersion", "kind", "resources", "patches", "images"].includes(key))
      throw new Error(`${dir}: kustomization field '${key}' is not handled by this renderer`);
  }
  let objs = [];
  for (const r of k.resources || []) {
    const p = path.resolve(dir, r);
    objs = objs.concat(fs.statSync(p).isDirectory() ? render(p) : readYaml(p));
  }
  for (const patch of k.patches || []) {
    const ops = YAML.parse(fs.readFileSync(path.join(dir, patch.path), "utf8"));
    if (!Array.isArray(ops)) throw new Error(`${dir}/${patch.path}: not a JSON patch`);
    const t = patch.target || {};
    const hit = objs.filter((o) => (!t.kind || o.kind === t.kind) &&
                                   (!t.name || o.metadata.name === t.name));
    if (!hit.length) throw new Error(`${dir}/${patch.path}: its target matches nothing`);
    for (const o of hit) applyJsonPatch(o, ops, `${dir}/${patch.path}`);
  }
  for (const img of k.images || []) {
    for (const o of objs) {
      for (const spec of podSpecs(o)) {
        for (const c of [...(spec.containers || []), ...(spec.initContainers || [])]) {
          const m = /^([^:@]+(?::\d+\/[^:@]+)?)(?::([^@]+))?(?:@(.+))?$/.exec(c.image);
          if (!m || m[1] !== img.name) continue;
          c.image = (img.newName || m[1]) + (img.digest ? "@" + img.digest
            : ":" + (img.newTag || m[2] || "latest"));
        }
      }
    }
  }
  return objs;
}

const keyOf = (o) => `${o.kind}/${(o.metadata && o.metadata.namespace) || ""}/${o.metadata.name}`;

function sameObjects(a, b) {
  const norm = (objs) => Object.fromEntries(objs.map((o) => [keyOf(o), o]));
  const x = norm(a), y = norm(b);
  const ks = new Set([...Object.keys(x), ...Object.keys(y)]);
  for (const k of ks) {
    if (JSON.stringify(sortKeys(x[k])) !== JSON.stringify(sortKeys(y[k]))) return k;
  }
  return null;
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object")
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

// ---- schemas ----

const MODEL_PACKAGES = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "gateway.networking.k8s.io": "@kubernetes-models/gateway-api",
};

function modelPath(o) {
  const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/")
    : ["", o.apiVersion];
  if (MODEL_PACKAGES[group]) return `${MODEL_PACKAGES[group]}/${group}/${version}/${o.kind}`;
  return `kubernetes-models/${group ? group + "/" : ""}${version}/${o.kind}`;
}

async function schemaErrors(o) {
  let mod;
  try {
    mod = await import(modelPath(o));
  } catch (e) {
    return [`no schema for ${o.apiVersion} ${o.kind} (${modelPath(o)})`];
  }
  const Model = mod[o.kind];
  try {
    new Model(o).validate();
  } catch (e) {
    return [e.message];
  }
  return unknownFields(o, dtsFile(modelPath(o)));
}

// The schemas accept fields they do not define (a typo such as `readinesProbe` passes), so
// the object is also walked against the models' type declarations: every field must be one
// the declaration names.
function dtsFile(spec) {
  const parts = spec.split("/");
  const pkg = spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
  const rest = spec.slice(pkg.length + 1);
  return path.join(NODE_MODULES, pkg, rest + ".d.ts");
}

const ifaceCache = new Map();

function stripComments(s) {
  return s.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

// Splits an interface or object-literal body into [name, type] pairs at top-level `;`.
function members(body) {
  const out = [];
  let depth = 0, cur = "";
  for (const ch of body) {
    if ("{<(".includes(ch)) depth++;
    if ("}>)".includes(ch)) depth--;
    if (ch === ";" && depth === 0) {
      const m = /^\s*"([^"]+)"\??\s*:\s*([\s\S]+)$/.exec(cur);
      if (m) out.push([m[1], m[2].trim()]);
      cur = "";
    } else cur += ch;
  }
  return out;
}

function matchBrace(s, open) {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    if (s[i] === "{") depth++;
    if (s[i] === "}" && --depth === 0) return i;
  }
  return -1;
}

function loadIface(file) {
  if (ifaceCache.has(file)) return ifaceCache.get(file);
  let iface = null;
  if (fs.existsSync(file)) {
    const text = stripComments(fs.readFileSync(file, "utf8"));
    const imports = new Map();
    for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
      const spec = m[2];
      const f = spec.startsWith(".") ? path.resolve(path.dirname(file),
        spec.replace(/\.js$/, "") + ".d.ts") : dtsFile(spec);
      imports.set(m[1], f);
    }
    // the class declaration lists every field, those of extended interfaces included
    const m = /export declare class \w+ extends Model<\w+> implements \w+ \{/.exec(text)
      || /export interface \w+(?: extends [\w, ]+)? \{/.exec(text);
    if (m) {
      const open = m.index + m[0].length - 1;
      iface = { props: new Map(members(text.slice(open + 1, matchBrace(text, open)))), imports };
    }
  }
  ifaceCache.set(file, iface);
  return iface;
}

function checkType(v, type, iface, where, errs) {
  type = type.trim();
  let m;
  if ((m = /^Array<([\s\S]+)>$/.exec(type))) {
    if (Array.isArray(v)) v.forEach((x, i) => checkType(x, m[1], iface, `${where}[${i}]`, errs));
    return;
  }
  if (type.startsWith("{")) {
    if (/^\{\s*\[key: string\]:/.test(type) || !v || typeof v !== "object") return;
    const body = type.slice(1, matchBrace(type, 0));
    checkProps(v, { props: new Map(members(body)), imports: iface.imports }, where, errs);
    return;
  }
  if (/^\w+$/.test(type) && iface.imports.has(type)) {
    const sub = loadIface(iface.imports.get(type));
    if (sub && v && typeof v === "object" && !Array.isArray(v)) checkProps(v, sub, where, errs);
  }
}

function checkProps(obj, iface, where, errs) {
  for (const [k, v] of Object.entries(obj)) {
    if (!iface.props.has(k)) {
      errs.push(`${where}.${k}: no such field`);
      continue;
    }
    checkType(v, iface.props.get(k), iface, `${where}.${k}`, errs);
  }
}

function unknownFields(o, file) {
  const iface = loadIface(file);
  if (!iface) return [`no type declaration ${file}`];
  const errs = [];
  checkProps(o, iface, o.kind, errs);
  return errs;
}

// InferencePool (inference.networking.k8s.io/v1) has no npm model: its fields as the
// extension's API reference defines them.
function inferencePoolErrors(o) {
  const errs = [];
  const allowed = (obj, keys, where) => {
    for (const k of Object.keys(obj || {})) if (!keys.includes(k)) errs.push(`${where}.${k}: no such field`);
  };
  allowed(o, ["apiVersion", "kind", "metadata", "spec"], "InferencePool");
  const s = o.spec || {};
  allowed(s, ["selector", "targetPorts", "appProtocol", "endpointPickerRef"], "spec");
  if (!s.selector || typeof s.selector.matchLabels !== "object") errs.push("spec.selector.matchLabels is required");
  allowed(s.selector, ["matchLabels"], "spec.selector");
  const ports = s.targetPorts || [];
  if (!Array.isArray(ports) || ports.length < 1 || ports.length > 8) errs.push("spec.targetPorts: 1 to 8 ports");
  for (const p of ports) {
    allowed(p, ["number"], "spec.targetPorts[]");
    if (!Number.isInteger(p.number) || p.number < 1 || p.number > 65535) errs.push("targetPorts[].number: a port");
  }
  if (new Set(ports.map((p) => p.number)).size !== ports.length) errs.push("targetPorts: numbers must be unique");
  const e = s.endpointPickerRef;
  if (!e || typeof e.name !== "string" || !e.name) errs.push("spec.endpointPickerRef.name is required");
  allowed(e, ["group", "kind", "name", "port", "failureMode"], "spec.endpointPickerRef");
  if (e && e.port && !Number.isInteger(e.port.number)) errs.push("endpointPickerRef.port.number: an integer");
  if (e && e.failureMode && !["FailOpen", "FailClose"].includes(e.failureMode)) errs.push("endpointPickerRef.failureMode: FailOpen or FailClose");
  if (s.appProtocol && !["http", "kubernetes.io/h2c"].includes(s.appProtocol)) errs.push("spec.appProtocol");
  return errs;
}

async function validate(o) {
  if (o.apiVersion === "inference.networking.k8s.io/v1" && o.kind === "InferencePool")
    return inferencePoolErrors(o);
  return schemaErrors(o);
}

// ---- the server's side ----

function helpFlags() {
  const p = spawnSync(path.join(binDir, "mhla-server"), ["--help"], { encoding: "utf8" });
  if (p.status !== 0) throw new Error("mhla-server --help failed: " + p.stderr);
  return new Set([...p.stdout.matchAll(/^\s+(--[a-z][a-z0-9-]*)/gm)].map((m) => m[1]));
}

// A container's settings: its env entries MHLA_<FLAG> with a value, as {"--flag": value}
// (base/opts.c's naming, backwards).
function flagOf(name) {
  return "--" + name.slice("MHLA_".length).toLowerCase().replaceAll("_", "-");
}

function settingsOf(c) {
  const out = {};
  for (const e of c.env || []) {
    if (e.name.startsWith("MHLA_") && e.value !== undefined) out[flagOf(e.name)] = String(e.value);
  }
  return out;
}

// The server started with these MHLA_ variables (and none of this process's) as its settings.
async function serverWith(settings) {
  fs.mkdirSync(workDir, { recursive: true });
  const logPath = path.join(workDir, "server.log");
  const log = fs.openSync(logPath, "w");
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("MHLA_")));
  Object.assign(env, settings);
  const proc = spawn(path.join(binDir, "mhla-server"), [], { stdio: ["ignore", "ignore", log], env });
  const exited = new Promise((r) => proc.on("exit", (code) => r(code)));
  let port = null;
  for (let t0 = Date.now(); port === null && Date.now() - t0 < 120000;) {
    if (proc.exitCode !== null) break;
    const m = /"event":"listening".*?"port":(\d+)/.exec(fs.readFileSync(logPath, "utf8"));
    if (m) port = Number(m[1]);
    else await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, port, exited, log: () => fs.readFileSync(logPath, "utf8") };
}

// ---- the test ----

async function main() {
  const dirs = [];
  (function walk(d) {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(path.join(d, e.name));
      else if (e.name === "kustomization.yaml") dirs.push(d);
    }
  })(K8S);
  dirs.sort();
  const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status === 0;
  console.log(kubectl ? "kubectl found: kustomizations rendered by `kubectl kustomize` and by "
    + "this test's renderer, compared"
    : "kubectl not installed: kustomizations rendered by this test's renderer of the kustomize "
    + "subset the manifests use (resources, JSON patches, images)");

  const rendered = {};
  const used = new Set();
  for (const d of dirs) {
    const rel = path.relative(K8S, d);
    let objs;
    try {
      objs = render(d);
    } catch (e) {
      check(false, `${rel}: renders (${e.message})`);
      continue;
    }
    if (kubectl) {
      const p = spawnSync("kubectl", ["kustomize", d], { encoding: "utf8" });
      if (check(p.status === 0, `${rel}: kubectl kustomize renders it`
                + (p.status ? `: ${p.stderr.trim()}` : ""))) {
        const theirs = YAML.parseAllDocuments(p.stdout).map((x) => x.toJS()).filter(Boolean);
        const diff = sameObjects(objs, theirs);
        check(diff === null, `${rel}: kubectl and this renderer give the same ${objs.length} `
              + `objects${diff ? ` (differ at ${diff})` : ""}`);
      }
    }
    rendered[rel] = objs;
    for (const o of objs) {
      const errs = await validate(o);
      check(errs.length === 0, `${rel}: ${o.apiVersion} ${o.kind} ${o.metadata.name} is valid`
            + (errs.length ? `: ${errs.slice(0, 3).join("; ")}` : ""));
    }
    const k = YAML.parse(fs.readFileSync(path.join(d, "kustomization.yaml"), "utf8"));
    for (const r of k.resources || []) used.add(path.resolve(d, r));
    for (const p of k.patches || []) used.add(path.resolve(d, p.path));
  }
  // every YAML file is rendered (a resource or a patch) or is the chart values file
  const stray = [];
  (function walk(d) {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.ya?ml$/.test(e.name) && e.name !== "kustomization.yaml" && !used.has(p)
               && e.name !== "epp-values.yaml") stray.push(path.relative(K8S, p));
    }
  })(K8S);
  check(stray.length === 0, `every manifest is part of a kustomization (${stray.join(", ") || "all"})`);

  // the validation can fail: broken copies of the Deployment are refused
  const base = rendered["base"] || [];
  const dep = base.find((o) => o.kind === "Deployment");
  if (check(dep !== undefined, "base has a Deployment")) {
    const typo = structuredClone(dep);
    typo.spec.template.spec.containers[0].readinesProbe = typo.spec.template.spec.containers[0].readinessProbe;
    const badType = structuredClone(dep);
    badType.spec.template.spec.containers[0].ports[0].containerPort = "eighty";
    check((await validate(typo)).length > 0, "a misspelt field (readinesProbe) is refused");
    check((await validate(badType)).length > 0, "a wrong type (containerPort: \"eighty\") is refused");
    const pool = (rendered["routing/inference-extension"] || []).find((o) => o.kind === "InferencePool");
    if (pool) {
      const bad = structuredClone(pool);
      delete bad.spec.endpointPickerRef;
      check(inferencePoolErrors(bad).length > 0, "an InferencePool without endpointPickerRef is refused");
    }
  }

  // the manifests and the server agree
  const flags = helpFlags();
  for (const [rel, objs] of Object.entries(rendered)) {
    for (const o of objs.filter((x) => x.kind === "Deployment")) {
      for (const c of o.spec.template.spec.containers) {
        const words = (c.command || []).concat(c.args || []);
        check(words.length === 0, `${rel}: ${c.name} runs the image's entrypoint with no args, `
              + `its settings in env (${words.join(" ") || "none"})`);
        const names = (c.env || []).map((e) => e.name).filter((n) => n.startsWith("MHLA_"));
        const missing = names.filter((n) => !flags.has(flagOf(n)));
        const twice = names.filter((n, i) => names.indexOf(n) !== i);
        check(names.length > 0 && missing.length === 0 && twice.length === 0,
              `${rel}: every MHLA_ variable of ${c.name} is a flag of mhla-server --help, each once`
              + (missing.length || twice.length ? ` (not flags: ${missing.join(" ")}; twice: ${twice.join(" ")})`
                : ` (${names.length})`));
      }
    }
  }
  const podOf = (objs) => {
    const d = objs.find((o) => o.kind === "Deployment");
    return d && { d, spec: d.spec.template.spec, c: d.spec.template.spec.containers[0] };
  };
  for (const rel of ["base", "overlays/cpu", "overlays/gpu"]) {
    const p = podOf(rendered[rel] || []);
    if (!check(p !== undefined, `${rel}: has the Deployment`)) continue;
    const { d, spec, c } = p;
    const set = settingsOf(c);
    const shutdown = Number(set["--shutdown-timeout"] || 30);
    const preStop = Number((c.lifecycle.preStop.exec.command.find((x) => /^\d+$/.test(x))) || 0);
    check(spec.terminationGracePeriodSeconds >= preStop + shutdown,
          `${rel}: terminationGracePeriodSeconds ${spec.terminationGracePeriodSeconds} >= preStop ${preStop} + --shutdown-timeout ${shutdown}`);
    const live = c.livenessProbe;
    check(live.periodSeconds * live.failureThreshold >= shutdown,
          `${rel}: liveness outlasts a drain (${live.periodSeconds} x ${live.failureThreshold} s >= ${shutdown} s)`);
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      const g = c[probe] && c[probe].httpGet;
      check(g && g.path === "/health" && c.ports.some((x) => x.name === g.port || x.containerPort === g.port),
            `${rel}: ${probe} is GET /health on the server's port`);
    }
    check(spec.securityContext.runAsNonRoot === true && c.securityContext.readOnlyRootFilesystem === true
          && c.securityContext.allowPrivilegeEscalation === false,
          `${rel}: non-root, read-only root filesystem, no privilege escalation`);
    const model = set["--model"] || "";
    const mount = c.volumeMounts.find((m) => model.startsWith(m.mountPath + "/"));
    const vol = mount && spec.volumes.find((v) => v.name === mount.name);
    check(vol && (vol.persistentVolumeClaim || vol.csi || vol.nfs || vol.image),
          `${rel}: the model (${model}) comes from a volume (${vol ? JSON.stringify(Object.keys(vol)) : "none"})`);
    const labels = d.spec.template.metadata.labels;
    const matches = (sel) => sel && Object.entries(sel).every(([k, v]) => labels[k] === v);
    for (const o of rendered[rel]) {
      if (o.kind === "PodDisruptionBudget") check(matches(o.spec.selector.matchLabels), `${rel}: the PDB selects the pods`);
      if (o.kind === "Service") check(matches(o.spec.selector), `${rel}: Service ${o.metadata.name} selects the pods`);
    }
    const device = set["--device"];
    const gpus = ((c.resources || {}).limits || {})["nvidia.com/gpu"];
    if (rel === "overlays/gpu") {
      check(device === "cuda" && Number(gpus) >= 1, `gpu overlay: --device cuda and an nvidia.com/gpu limit (${device}, ${gpus})`);
      check(/-cuda$/.test(c.image), `gpu overlay: the CUDA image (${c.image})`);
    }
    if (rel === "overlays/cpu") check(device === "cpu" && gpus === undefined, `cpu overlay: --device cpu, no GPU (${device})`);
  }
  const svcs = base.filter((o) => o.kind === "Service");
  const sm = base.find((o) => o.kind === "ServiceMonitor");
  const smHits = sm ? svcs.filter((s) => Object.entries(sm.spec.selector.matchLabels)
    .every(([k, v]) => (s.metadata.labels || {})[k] === v)) : [];
  check(smHits.length === 1, `the ServiceMonitor scrapes each pod once (selects ${smHits.length} Service)`);
  const hpa = base.find((o) => o.kind === "HorizontalPodAutoscaler");
  const hpaMetric = hpa && hpa.spec.metrics[0].pods.metric.name;
  const adapterCm = (rendered["monitoring"] || []).find((o) => o.kind === "ConfigMap");
  const rules = adapterCm ? YAML.parse(adapterCm.data["config.yaml"]).rules : [];
  check(rules.some((r) => r.name.as === hpaMetric && r.seriesQuery.includes(hpaMetric)),
        `the Prometheus adapter serves the HPA's metric (${hpaMetric})`);
  const route = (rendered["routing/inference-extension"] || []).find((o) => o.kind === "HTTPRoute");
  const pool = (rendered["routing/inference-extension"] || []).find((o) => o.kind === "InferencePool");
  const basePod = podOf(base);
  if (pool && route && basePod) {
    check(route.spec.rules[0].backendRefs[0].name === pool.metadata.name, "the HTTPRoute sends to the InferencePool");
    check(Object.entries(pool.spec.selector.matchLabels).every(([k, v]) => basePod.d.spec.template.metadata.labels[k] === v),
          "the InferencePool selects the pods");
    check(pool.spec.targetPorts[0].number === basePod.c.ports[0].containerPort, "the InferencePool targets the server's port");
  }
  const ing = (rendered["routing/ingress"] || []).find((o) => o.kind === "Ingress");
  if (ing) check(svcs.some((s) => s.metadata.name === ing.spec.rules[0].http.paths[0].backend.service.name),
                 "the Ingress sends to the base's Service");

  // a server started with the CPU overlay's env (on loopback, a free port, the bundled
  // model and a small state pool) answers /health and exposes every metric named above
  const epp = YAML.parse(fs.readFileSync(path.join(K8S, "routing/inference-extension/epp-values.yaml"), "utf8"));
  const eppMetrics = epp.inferenceExtension.flags.filter((f) => /-metric$/.test(f.name) && f.value).map((f) => f.value);
  const cpu = podOf(rendered["overlays/cpu"] || []);
  if (cpu) {
    const env = Object.fromEntries((cpu.c.env || []).filter((e) => e.value !== undefined)
      .map((e) => [e.name, String(e.value)]));
    Object.assign(env, { MHLA_HOST: "127.0.0.1", MHLA_PORT: "0", MHLA_STATE_MEMORY: "64",
                         MHLA_MODEL: path.join(ROOT, "models", "brown-mhla"), MHLA_THREADS: "1" });
    const s = await serverWith(env);
    try {
      if (check(s.port !== null, "mhla-server starts with the CPU overlay's env" + (s.port ? "" : `: ${s.log().slice(-500)}`))) {
        const h = await fetch(`http://127.0.0.1:${s.port}/health`);
        check(h.status === 200, `/health answers 200 (${h.status})`);
        const text = await (await fetch(`http://127.0.0.1:${s.port}/metrics`)).text();
        const names = new Set([...text.matchAll(/^([a-z_:]+)(?:\{| )/gm)].map((m) => m[1]));
        for (const n of [hpaMetric, ...eppMetrics]) check(names.has(n), `/metrics has ${n} (read by name by the HPA or the endpoint picker)`);
      }
    } finally {
      s.proc.kill("SIGTERM");
      const code = await Promise.race([s.exited, new Promise((r) => setTimeout(() => r("late"), 60000))]);
      if (code === "late") s.proc.kill("SIGKILL");
    }
  }

  console.log(failures ? `${failures} check(s) failed` : "all checks passed");
  process.exit(failures ? 1 : 0);
}

main().catch((e) => {
  console.log("FAIL " + (e.stack || e));
  process.exit(1);
});
