/**
 * A user's first day with kubectl on `koder-fleet dev` (issue 31): the real kubectl applies a
 * Deployment and its Service from YAML and then does what a user does next (rollout status and
 * history and undo, get in every output format, describe, logs, scale, wait, patches, labels,
 * annotations, diff, get -w), each asserted on what kubectl prints. The Deployment's pods are
 * host processes: a small Node.js HTTP server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { output, pollKubectl, startDev, waitForOutput, type KubectlCluster } from "./KubectlCluster.js"

// `node -e` with the server; the agent passes the port it gave `http` as $PORT.
const server = `
const http = require("node:http")
http.createServer((req, res) => {
  if (req.url === "/healthz") return res.end("ok")
  console.log("served " + req.url)
  res.end("hello " + process.env.GREETING + "\\n")
}).listen(Number(process.env.PORT), () => console.log("listening on " + process.env.PORT + " as " + process.env.GREETING))
`

const manifests = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: web
          image: node:20-alpine
          command: ["node", "-e", ${JSON.stringify(server)}]
          env:
            - name: GREETING
              value: one
          ports:
            - name: http
              containerPort: 8080
          readinessProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
    - port: 80
      targetPort: http
`

// kubectl's AGE column: `45s`, `3m20s`, `2h`.
const age = String.raw`\d+[smhd]\w*`

describe("kubectl on koder-fleet dev: a Deployment and its Service", () => {
  let c: KubectlCluster
  let file: string

  beforeAll(async () => {
    c = await startDev()
    file = await c.writeFile("web.yaml", manifests)
  }, 60_000)
  afterAll(async () => {
    await c?.stop()
  }, 30_000)

  it("apply -f creates the Deployment and the Service; applying again prints unchanged", async () => {
    expect(await c.ok(["apply", "-f", file])).toBe("deployment.apps/web created\nservice/web created\n")
    expect(await c.ok(["apply", "-f", file])).toBe("deployment.apps/web unchanged\nservice/web unchanged\n")
  })

  it("rollout status waits until both replicas are available", async () => {
    const out = await c.ok(["rollout", "status", "deployment/web", "--timeout=40s"], { timeoutMs: 45_000 })
    expect(out).toContain('deployment "web" successfully rolled out')
    expect(await c.ok(["get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}/{.status.replicas}"])).toBe("2/2")
  }, 50_000)

  it("get prints the default table, -o wide, -o yaml, -o jsonpath and -o custom-columns", async () => {
    const [table, wide, yaml, jsonpath, columns, service] = await Promise.all([
      c.ok(["get", "deployments"]),
      c.ok(["get", "pods", "-l", "app=web", "-o", "wide"]),
      c.ok(["get", "deployment", "web", "-o", "yaml"]),
      c.ok(["get", "pods", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}"]),
      c.ok(["get", "pods", "-l", "app=web", "--sort-by=.metadata.name", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,IMAGE:.spec.containers[0].image"]),
      c.ok(["get", "service", "web"])
    ])
    expect(table).toMatch(new RegExp(String.raw`^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\nweb\s+2/2\s+2\s+2\s+${age}\n$`))
    const [header, ...rows] = wide.trimEnd().split("\n")
    expect(header).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE/)
    expect(rows).toHaveLength(2)
    for (const row of rows) expect(row).toMatch(new RegExp(String.raw`^web-[a-z0-9]+-[a-z0-9]{5}\s+1/1\s+Running\s+0\s+${age}\s+\S+\s+kubectl-node`))
    expect(yaml).toMatch(/^apiVersion: apps\/v1\nkind: Deployment\n/)
    expect(yaml).toContain("  name: web\n")
    expect(yaml).toContain("kubectl.kubernetes.io/last-applied-configuration")
    expect(yaml).toMatch(/\n {2}replicas: 2\n/)
    const phases = jsonpath.trimEnd().split("\n")
    expect(phases).toHaveLength(2)
    for (const line of phases) expect(line).toMatch(/^web-\S+ Running$/)
    const [columnsHeader, ...columnRows] = columns.trimEnd().split("\n")
    expect(columnsHeader).toMatch(/^NAME\s+NODE\s+IMAGE$/)
    expect(columnRows.map((r) => r.split(/\s+/).slice(1))).toEqual([
      ["kubectl-node", "node:20-alpine"],
      ["kubectl-node", "node:20-alpine"]
    ])
    expect(service).toMatch(new RegExp(String.raw`^NAME\s+TYPE\s+CLUSTER-IP\s+.*PORT\(S\)\s+AGE\nweb\s+ClusterIP\s+\d+\.\d+\.\d+\.\d+\s+.*80/TCP\s+${age}\n$`))
  })

  it("describe shows the Deployment's replicas, template and events, and a pod's state and owner", async () => {
    const deployment = await c.ok(["describe", "deployment", "web"])
    expect(deployment).toMatch(/^Name:\s+web\nNamespace:\s+default\n/)
    expect(deployment).toMatch(/Replicas:\s+2 desired \| 2 updated \| 2 total \| 2 available \| 0 unavailable/)
    expect(deployment).toMatch(/StrategyType:\s+RollingUpdate/)
    expect(deployment).toMatch(/GREETING:\s+one/)
    expect(deployment).toMatch(/NewReplicaSet:\s+web-[a-z0-9]+ \(2\/2 replicas created\)/)
    expect(deployment).toMatch(/Normal\s+ScalingReplicaSet\s+.*Scaled up replica set web-[a-z0-9]+ from 0 to 2/)
    const pod = await c.ok(["describe", "pods", "-l", "app=web"])
    expect(pod).toMatch(/Status:\s+Running/)
    expect(pod).toMatch(/Controlled By:\s+ReplicaSet\/web-[a-z0-9]+/)
    expect(pod).toMatch(/Node:\s+kubectl-node\//)
    expect(pod).toMatch(/State:\s+Running/)
    expect(pod).toMatch(/Normal\s+Started\s+.*Started container web/)
  })

  it("logs prints what the pods wrote, by Deployment and by label with --prefix", async () => {
    expect(await c.ok(["logs", "deployment/web"])).toMatch(/^listening on \d+ as one\n/)
    const prefixed = await c.ok(["logs", "-l", "app=web", "--prefix", "--tail=1"])
    const lines = prefixed.trimEnd().split("\n")
    expect(lines).toHaveLength(2)
    for (const line of lines) expect(line).toMatch(/^\[pod\/web-\S+\/web\] listening on \d+ as one$/)
  })

  it("get -w prints the Deployment's row, then its row again as it scales", async () => {
    const watch = c.spawn(["get", "deployment", "web", "-w", "--output-watch-events"])
    try {
      await waitForOutput(watch, /^EVENT\s+NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\nADDED\s+web\s+2\/2\s/)
      expect(await c.ok(["scale", "deployment/web", "--replicas=3"])).toBe("deployment.apps/web scaled\n")
      // Every later row has the same columns as the first: the server's Table, not a fallback.
      await waitForOutput(watch, new RegExp(String.raw`\nMODIFIED\s+web\s+\d/3\s+\d+\s+\d+\s+${age}\n`))
      await waitForOutput(watch, new RegExp(String.raw`\nMODIFIED\s+web\s+3/3\s+3\s+3\s+${age}\n`), 30_000)
      expect(output(watch).stdout.match(/^EVENT/gm)).toHaveLength(1)
    } finally {
      watch.kill()
    }
  }, 40_000)

  it("scale and wait --for=condition=Available", async () => {
    expect(await c.ok(["scale", "deployment/web", "--replicas=2"])).toBe("deployment.apps/web scaled\n")
    expect(await c.ok(["wait", "--for=condition=Available", "deployment/web", "--timeout=30s"], { timeoutMs: 35_000 })).toBe("deployment.apps/web condition met\n")
    await pollKubectl(c, ["get", "deployment", "web", "-o", "jsonpath={.status.replicas}"], (r) => r.stdout === "2")
  }, 40_000)

  it("patch: a strategic merge patch merges the env list by name; --type=json takes it out again; --type=merge adds a label", async () => {
    const strategic = '{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"EXTRA","value":"x"}]}]}}}}'
    expect(await c.ok(["patch", "deployment", "web", "-p", strategic])).toBe("deployment.apps/web patched\n")
    const env = await c.ok(["get", "deployment", "web", "-o", "jsonpath={range .spec.template.spec.containers[0].env[*]}{.name}={.value} {end}"])
    expect(env.trim().split(" ").sort()).toEqual(["EXTRA=x", "GREETING=one"])
    // The JSON patch takes EXTRA out again, where the merge put it; its test op pins the index.
    const at = env.trim().split(" ").findIndex((e) => e.startsWith("EXTRA="))
    const remove = `[{"op":"test","path":"/spec/template/spec/containers/0/env/${at}/name","value":"EXTRA"},{"op":"remove","path":"/spec/template/spec/containers/0/env/${at}"}]`
    expect(await c.ok(["patch", "deployment", "web", "--type=json", "-p", remove])).toBe("deployment.apps/web patched\n")
    expect(await c.ok(["get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].env[*].name}"])).toBe("GREETING")
    // A JSON patch whose test fails changes nothing and says why.
    const failed = await c.kubectl(["patch", "deployment", "web", "--type=json", "-p", '[{"op":"test","path":"/spec/replicas","value":7}]'])
    expect(failed.code).toBe(1)
    expect(failed.stderr).toContain("test failed")
    expect(await c.ok(["patch", "deployment", "web", "--type=merge", "-p", '{"metadata":{"labels":{"tier":"front"}}}'])).toBe("deployment.apps/web patched\n")
    expect(await c.ok(["get", "deployments", "-l", "tier=front", "-o", "name"])).toBe("deployment.apps/web\n")
  })

  it("label and annotate: set, refuse to overwrite without --overwrite, remove", async () => {
    expect(await c.ok(["label", "deployment", "web", "team=a"])).toBe("deployment.apps/web labeled\n")
    const again = await c.kubectl(["label", "deployment", "web", "team=b"])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain("'team' already has a value (a), and --overwrite is false")
    expect(await c.ok(["label", "deployment", "web", "team=b", "--overwrite"])).toBe("deployment.apps/web labeled\n")
    expect(await c.ok(["get", "deployments", "-l", "team=b", "--show-labels"])).toMatch(/\nweb\s+.*\s+app=web,.*team=b,tier=front\n$/)
    expect(await c.ok(["label", "deployment", "web", "team-"])).toBe("deployment.apps/web unlabeled\n")
    expect(await c.ok(["get", "deployments", "-l", "team"])).toBe("")
    expect(await c.ok(["annotate", "deployment", "web", "owner=ops@example.com"])).toBe("deployment.apps/web annotated\n")
    expect(await c.ok(["get", "deployment", "web", "-o", "jsonpath={.metadata.annotations.owner}"])).toBe("ops@example.com")
    expect(await c.ok(["annotate", "deployment", "web", "owner-"])).toBe("deployment.apps/web annotated\n")
    expect(await c.ok(["get", "deployment", "web", "-o", "jsonpath={.metadata.annotations.owner}"])).toBe("")
  })

  it("diff exits 0 when the file matches the cluster and 1 with a unified diff when it does not", async () => {
    // No rollout in flight: diff compares a read with a dry run, and a status written in between differs.
    await c.ok(["rollout", "status", "deployment/web", "--timeout=40s"], { timeoutMs: 45_000 })
    const same = await c.kubectl(["diff", "-f", file])
    expect(same, same.stderr).toMatchObject({ code: 0, stdout: "" })
    const changed = await c.writeFile("web-4.yaml", manifests.replace("replicas: 2", "replicas: 4"))
    const differs = await c.kubectl(["diff", "-f", changed])
    expect(differs.code, differs.stderr).toBe(1)
    expect(differs.stdout).toMatch(/^diff -u -N /)
    expect(differs.stdout).toMatch(/\n- {2}replicas: 2\n\+ {2}replicas: 4\n/)
    // diff is a dry run: nothing changed.
    expect(await c.ok(["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"])).toBe("2")
  }, 50_000)

  it("rollout history lists the revisions; undo goes back to the previous template", async () => {
    expect(await c.ok(["set", "env", "deployment/web", "GREETING=two"])).toBe("deployment.apps/web env updated\n")
    expect(await c.ok(["rollout", "status", "deployment/web", "--timeout=40s"], { timeoutMs: 45_000 })).toContain('deployment "web" successfully rolled out')
    expect(await c.ok(["logs", "deployment/web"])).toMatch(/^listening on \d+ as two\n/)
    const history = await c.ok(["rollout", "history", "deployment/web"])
    expect(history).toMatch(/^deployment\.apps\/web \nREVISION\s+CHANGE-CAUSE\n/)
    const revisions = [...history.matchAll(/^(\d+)\s+<none>$/gm)].map((m) => Number(m[1]))
    const [previous, current] = revisions.slice(-2)
    expect(current).toBe(previous! + 1)
    expect(await c.ok(["rollout", "history", "deployment/web", `--revision=${current}`])).toMatch(/GREETING:\s+two/)
    expect(await c.ok(["rollout", "undo", "deployment/web"])).toBe("deployment.apps/web rolled back\n")
    expect(await c.ok(["rollout", "status", "deployment/web", "--timeout=40s"], { timeoutMs: 45_000 })).toContain('deployment "web" successfully rolled out')
    expect(await c.ok(["get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].env[?(@.name==\"GREETING\")].value}"])).toBe("one")
    expect(await c.ok(["get", "deployment", "web", "-o", "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision}"])).toBe(String(current! + 1))
    await pollKubectl(c, ["logs", "deployment/web"], (r) => /^listening on \d+ as one\n/.test(r.stdout))
  }, 120_000)
})
