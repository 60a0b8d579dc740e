/**
 * The CLI's pure decisions: three-way merge, kubeconfig resolution, printers, JSONPath, manifest
 * errors, rollout status messages, ages.
 */
import type { Command } from "commander"
import { describe, expect, it } from "vitest"
import * as Age from "../src/Age.js"
import * as JsonPath from "../src/JsonPath.js"
import * as Kubeconfig from "../src/Kubeconfig.js"
import * as Manifests from "../src/Manifests.js"
import * as Printers from "../src/Printers.js"
import * as Rollout from "../src/Rollout.js"
import * as ThreeWayMerge from "../src/ThreeWayMerge.js"

describe("ThreeWayMerge", () => {
  const desired = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", labels: { a: "1" } }, data: { k: "v" } }

  it("re-applying the same object patches nothing, whatever the server added", () => {
    const live = ThreeWayMerge.withLastApplied(desired)
    const served = { ...live, metadata: { ...(live["metadata"] as object), uid: "u", resourceVersion: "7", labels: { a: "1", "fleet.koder.dev/region": "local" } } }
    expect(ThreeWayMerge.applyPatch(desired, served)).toEqual({})
  })

  it("sets what changed, removes what the last apply had and this one has not, keeps other writers' fields", () => {
    const live = ThreeWayMerge.withLastApplied(desired) as Record<string, any>
    live["metadata"]["labels"] = { a: "1", other: "kept" }
    const next = { ...desired, metadata: { name: "c", labels: {} }, data: { k: "w" } }
    const patch = ThreeWayMerge.applyPatch(next, live) as Record<string, any>
    expect(patch["data"]).toEqual({ k: "w" })
    expect(patch["metadata"]["labels"]).toEqual({ a: null })
    expect(JSON.parse(patch["metadata"]["annotations"][ThreeWayMerge.lastAppliedAnnotation])["data"]).toEqual({ k: "w" })
  })

  it("treats lists as atomic but ignores server defaults inside their elements", () => {
    const want = { spec: { containers: [{ name: "a", image: "x" }] } }
    const live = { spec: { containers: [{ name: "a", image: "x", imagePullPolicy: "IfNotPresent" }] } }
    expect(ThreeWayMerge.patch(undefined, want, live)).toEqual({})
    expect(ThreeWayMerge.patch(undefined, { spec: { containers: [{ name: "a", image: "y" }] } }, live)).toEqual({ spec: { containers: [{ name: "a", image: "y" }] } })
  })
})

describe("Kubeconfig", () => {
  const doc = {
    "current-context": "dev",
    clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:9300/", "certificate-authority-data": Buffer.from("PEM").toString("base64") } }],
    users: [{ name: "u", user: { token: "t0k" } }],
    contexts: [
      { name: "dev", context: { cluster: "c", user: "u" } },
      { name: "shop", context: { cluster: "c", user: "u", namespace: "shop" } }
    ]
  }

  it("resolves the current context, a chosen one, and flag overrides", () => {
    const k = Kubeconfig.merge(["f"], [doc])
    expect(Kubeconfig.resolve(k, {})).toMatchObject({ server: "https://127.0.0.1:9300", namespace: "default", token: "t0k", caPem: "PEM" })
    expect(Kubeconfig.resolve(k, { context: "shop" }).namespace).toBe("shop")
    expect(Kubeconfig.resolve(k, { context: "shop", namespace: "x", server: "https://h:1" })).toMatchObject({ namespace: "x", server: "https://h:1" })
    expect(() => Kubeconfig.resolve(k, { context: "nope" })).toThrow(/context "nope" does not exist/)
  })

  it("looks for --kubeconfig, then KUBECONFIG, then ~/.koder-fleet, then ~/.kube/config", () => {
    expect(Kubeconfig.locate("/x", { KUBECONFIG: "/y" }, "/h")).toEqual(["/x"])
    expect(Kubeconfig.locate(undefined, { KUBECONFIG: "/y:/z" }, "/h")).toEqual(["/y", "/z"])
    expect(Kubeconfig.locate(undefined, {}, "/h", (p) => p === "/h/.kube/config")).toEqual(["/h/.kube/config"])
    expect(Kubeconfig.locate(undefined, {}, "/h", () => false)).toEqual(["/h/.koder-fleet/kubeconfig"])
  })

  it("edits keep the rest of the file, comments included", () => {
    const text = "# mine\napiVersion: v1\nkind: Config\ncontexts:\n  - name: dev\n    context:\n      cluster: c\ncurrent-context: dev\n"
    const edited = Kubeconfig.withContextFields(Kubeconfig.withCurrentContext(text, "dev"), "dev", { namespace: "shop" })
    expect(edited).toContain("# mine")
    expect(edited).toContain("namespace: shop")
  })
})

describe("Printers and JSONPath", () => {
  it("aligns columns three spaces apart", () => {
    expect(Printers.align([["NAME", "READY"], ["hello-abc", "1/1"]])).toBe("NAME        READY\nhello-abc   1/1")
  })

  it("prints server tables, wide columns only with -o wide, NAMESPACE with -A", () => {
    const table = { columnDefinitions: [{ name: "Name" }, { name: "Ready" }, { name: "Node", priority: 1 }], rows: [{ cells: ["a", "1/1", "n1"], object: { metadata: { namespace: "ns" } } }] }
    expect(Printers.tableRows(table)).toEqual([["NAME", "READY"], ["a", "1/1"]])
    expect(Printers.tableRows(table, { wide: true, withNamespace: true })).toEqual([["NAMESPACE", "NAME", "READY", "NODE"], ["ns", "a", "1/1", "n1"]])
  })

  it("renders kubectl JSONPath templates: ranges, filters, literals", () => {
    const list = { items: [{ metadata: { name: "a" }, status: { conditions: [{ type: "Ready", status: "True" }] } }, { metadata: { name: "b" }, status: { conditions: [] } }] }
    expect(JsonPath.render("{.items[*].metadata.name}", list)).toBe("a b")
    expect(JsonPath.render('{range .items[*]}{.metadata.name}{"\\n"}{end}', list)).toBe("a\nb\n")
    expect(JsonPath.render('{.items[0].status.conditions[?(@.type=="Ready")].status}', list)).toBe("True")
    expect(() => JsonPath.parse("{.items")).toThrow(/unclosed/)
  })

  it("custom columns print <none> for missing values", () => {
    const f = Printers.parseFormat("custom-columns=NAME:.metadata.name,NODE:.spec.nodeName")
    expect(f._tag === "CustomColumns" && Printers.customColumns(f.columns, [{ metadata: { name: "a" } }])).toEqual([["NAME", "NODE"], ["a", "<none>"]])
  })
})

describe("Manifests", () => {
  it("reports a malformed file with its path, line and column", () => {
    expect(() => Manifests.parseText("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: [a\n")).toThrow(/^error parsing bad\.yaml: line \d+, column \d+: /)
    expect(() => Manifests.parseText("two.yaml", "apiVersion: v1\nkind: ConfigMap\n---\nkind: Pod\n")).toThrow("error validating two.yaml: line 4: apiVersion not set")
  })

  it("reads several documents and expands Lists", () => {
    const text = "apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n---\n---\n{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"b\"}}\n"
    expect(Manifests.parseText("f", text).map((m) => m.object["kind"])).toEqual(["ConfigMap", "Secret"])
  })
})

describe("Rollout and Age", () => {
  const d = (status: object, extra: object = {}) => ({ metadata: { name: "web", generation: 2 }, spec: { replicas: 3 }, status: { observedGeneration: 2, ...status }, ...extra })

  it("says what a rollout waits for, in kubectl's words", () => {
    expect(Rollout.deploymentStatus(d({ updatedReplicas: 1, replicas: 3 })).message).toBe('Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...')
    expect(Rollout.deploymentStatus(d({ updatedReplicas: 3, replicas: 4 })).message).toBe('Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...')
    expect(Rollout.deploymentStatus(d({ updatedReplicas: 3, replicas: 3, availableReplicas: 3 }))).toEqual({ done: true, message: 'deployment "web" successfully rolled out' })
    expect(Rollout.deploymentStatus(d({ conditions: [{ type: "Progressing", reason: "ProgressDeadlineExceeded" }] })).failed).toBe(true)
  })

  it("undoes to the second-newest ReplicaSet, even before the Deployment's revision annotation catches up", () => {
    const deploy = (revision: string) => ({ metadata: { name: "web", uid: "u1", annotations: { "deployment.kubernetes.io/revision": revision } } })
    const rs = (revision: number, image: string, owner = "u1") => ({
      metadata: { name: `web-${revision}`, annotations: { "deployment.kubernetes.io/revision": String(revision) }, ownerReferences: [{ uid: owner, controller: true }] },
      spec: { template: { metadata: { labels: { app: "web", "pod-template-hash": `h${revision}` } }, spec: { containers: [{ image }] } } }
    })
    const cases: ReadonlyArray<{ readonly name: string; readonly d: Record<string, unknown>; readonly rss: ReadonlyArray<Record<string, unknown>>; readonly to: number; readonly want: number | string }> = [
      { name: "after a rollout", d: deploy("2"), rss: [rs(1, "a"), rs(2, "b")], to: 0, want: 1 },
      { name: "annotation still names the old revision", d: deploy("1"), rss: [rs(2, "b"), rs(1, "a")], to: 0, want: 1 },
      { name: "three revisions", d: deploy("3"), rss: [rs(1, "a"), rs(3, "c"), rs(2, "b")], to: 0, want: 2 },
      { name: "an explicit revision", d: deploy("3"), rss: [rs(1, "a"), rs(2, "b"), rs(3, "c")], to: 1, want: 1 },
      { name: "only one revision", d: deploy("1"), rss: [rs(1, "a")], to: 0, want: "no rollout history found for deployment" },
      { name: "another Deployment's ReplicaSet", d: deploy("2"), rss: [rs(1, "a", "other"), rs(2, "b")], to: 0, want: "no rollout history found for deployment" },
      { name: "a missing revision", d: deploy("2"), rss: [rs(1, "a"), rs(2, "b")], to: 7, want: "unable to find specified revision 7 in history" }
    ]
    for (const c of cases) {
      const got = Rollout.undoTarget(c.d, c.rss, c.to)
      expect(typeof got === "string" ? got : got.revision, c.name).toBe(c.want)
      if (typeof got !== "string") expect((got.template as { metadata: { labels: object } }).metadata.labels, c.name).toEqual({ app: "web" })
    }
  })

  it("formats ages as kubectl does", () => {
    expect([Age.human(45_000), Age.human(330_000), Age.human(3 * 3600_000 + 60_000), Age.human(50 * 3600_000)]).toEqual(["45s", "5m30s", "3h1m", "2d2h"])
    expect(Age.parseDuration("1h30m")).toBe(5400)
    expect(Age.parseDuration("abc")).toBeUndefined()
  })
})

describe("help", () => {
  it("every verb has --help with examples", async () => {
    const { program } = await import("../src/Program.js")
    const missing: Array<string> = []
    const visit = (c: Command, path: string) => {
      let text = ""
      c.configureOutput({ writeOut: (s) => void (text += s) })
      c.outputHelp()
      if (c.commands.length === 0 && !/Examples:\n {2}\S/.test(text)) missing.push(path)
      for (const sub of c.commands) visit(sub, `${path} ${sub.name()}`.trim())
    }
    visit(program(), "")
    expect(missing).toEqual([])
  })
})
