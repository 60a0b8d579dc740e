/**
 * kubectl's imperative commands on `koder-fleet dev` (issue 31): create secret generic, run (a
 * pod), create job and wait for it to complete, create cronjob and a Job from it, get events,
 * auth can-i, top (metrics.k8s.io fed by the box's usage), cordon and uncordon. Pods are host
 * processes (`sh -c`, `sleep`): the process driver ignores images.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { pollKubectl, startDev, type KubectlCluster } from "./KubectlCluster.js"

describe("kubectl on koder-fleet dev: pods, jobs, secrets, the node", () => {
  let c: KubectlCluster

  beforeAll(async () => {
    c = await startDev()
  }, 60_000)
  afterAll(async () => {
    await c?.stop()
  }, 30_000)

  it("create secret generic, then get it as a table and decode a key with jsonpath", async () => {
    expect(await c.ok(["create", "secret", "generic", "creds", "--from-literal=user=admin", "--from-literal=password=s3cr3t"])).toBe("secret/creds created\n")
    expect(await c.ok(["get", "secret", "creds"])).toMatch(/^NAME\s+TYPE\s+DATA\s+AGE\ncreds\s+Opaque\s+2\s+\d+s\n$/)
    const encoded = await c.ok(["get", "secret", "creds", "-o", "jsonpath={.data.password}"])
    expect(Buffer.from(encoded, "base64").toString()).toBe("s3cr3t")
    const again = await c.kubectl(["create", "secret", "generic", "creds", "--from-literal=user=x"])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain('secrets "creds" already exists')
  })

  it("run starts a pod that becomes Ready and whose output logs prints", async () => {
    expect(await c.ok(["run", "sleeper", "--image=busybox", "--restart=Never", "--command", "--", "sh", "-c", "echo started as $HOSTNAME; exec sleep 600"])).toBe("pod/sleeper created\n")
    expect(await c.ok(["wait", "--for=condition=Ready", "pod/sleeper", "--timeout=30s"], { timeoutMs: 35_000 })).toBe("pod/sleeper condition met\n")
    expect(await c.ok(["get", "pod", "sleeper"])).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\nsleeper\s+1\/1\s+Running\s+0\s+\d+s\n$/)
    expect(await c.ok(["logs", "sleeper"])).toMatch(/^started as /)
    expect(await c.ok(["get", "pod", "sleeper", "-o", "jsonpath={.metadata.labels.run}"])).toBe("sleeper")
  }, 40_000)

  it("create job runs to completion: wait --for=condition=complete, get jobs, logs job/NAME", async () => {
    expect(await c.ok(["create", "job", "once", "--image=busybox", "--", "sh", "-c", "echo the job ran"])).toBe("job.batch/once created\n")
    expect(await c.ok(["wait", "--for=condition=complete", "job/once", "--timeout=30s"], { timeoutMs: 35_000 })).toBe("job.batch/once condition met\n")
    expect(await c.ok(["get", "jobs", "once"])).toMatch(/^NAME\s+STATUS\s+COMPLETIONS\s+DURATION\s+AGE\nonce\s+Complete\s+1\/1\s+\d+s\s+\d+s\n$/)
    expect(await c.ok(["logs", "job/once"])).toBe("the job ran\n")
  }, 40_000)

  it("create cronjob, get it, and create job --from=cronjob runs its template", async () => {
    expect(await c.ok(["create", "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *", "--", "sh", "-c", "echo tick"])).toBe("cronjob.batch/tick created\n")
    expect(await c.ok(["get", "cronjob", "tick"])).toMatch(/^NAME\s+SCHEDULE\s+TIMEZONE\s+SUSPEND\s+ACTIVE\s+LAST SCHEDULE\s+AGE\ntick\s+\*\/5 \* \* \* \*\s+<none>\s+False\s+0\s+<none>\s+\d+s\n$/)
    expect(await c.ok(["create", "job", "tick-now", "--from=cronjob/tick"])).toBe("job.batch/tick-now created\n")
    expect(await c.ok(["wait", "--for=condition=complete", "job/tick-now", "--timeout=30s"], { timeoutMs: 35_000 })).toBe("job.batch/tick-now condition met\n")
    expect(await c.ok(["logs", "job/tick-now"])).toBe("tick\n")
    expect(await c.ok(["get", "job", "tick-now", "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}"])).toBe("CronJob/tick")
  }, 40_000)

  it("get events lists what happened to the pods, also by field selector", async () => {
    const all = await c.ok(["get", "events"])
    expect(all).toMatch(/LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE/)
    expect(all).toMatch(/Normal\s+Started\s+pod\/sleeper\s+Started container sleeper/)
    expect(all).toMatch(/Normal\s+SuccessfulCreate\s+job\/once\s+Created pod: once-[a-z0-9]{5}/)
    const selected = await c.ok(["get", "events", "--field-selector", "involvedObject.kind=Pod,involvedObject.name=sleeper", "-o", "jsonpath={.items[*].reason}"])
    expect(selected.split(" ")).toContain("Started")
    expect(await c.ok(["get", "events", "--field-selector", "involvedObject.name=nothing-here"])).toBe("")
  })

  it("auth can-i answers yes for the admin and no (exit 1) for an impersonated nobody", async () => {
    const [admin, all, nobody] = await Promise.all([
      c.kubectl(["auth", "can-i", "create", "deployments"]),
      c.kubectl(["auth", "can-i", "*", "*"]),
      c.kubectl(["auth", "can-i", "get", "pods", "--as=nobody"])
    ])
    expect(admin).toMatchObject({ code: 0, stdout: "yes\n" })
    expect(all).toMatchObject({ code: 0, stdout: "yes\n" })
    expect(nobody).toMatchObject({ code: 1, stdout: "no\n" })
  })

  it("top pod and top node print the usage the box measured", async () => {
    // dev samples usage every second (--usage-interval 1s): the first sample may take a moment.
    const pods = await pollKubectl(c, ["top", "pod", "sleeper"], (r) => r.code === 0 && /\nsleeper\s/.test(r.stdout), 30_000)
    expect(pods.stdout).toMatch(/^NAME\s+CPU\(cores\)\s+MEMORY\(bytes\)\s*\nsleeper\s+\d+m\s+\d+Mi\s*\n$/)
    const nodes = await pollKubectl(c, ["top", "node"], (r) => r.code === 0 && /\nkubectl-node\s/.test(r.stdout), 30_000)
    expect(nodes.stdout).toMatch(/^NAME\s+CPU\(cores\)\s+CPU%\s+MEMORY\(bytes\)\s+MEMORY%\s*\nkubectl-node\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%\s*\n$/)
  }, 70_000)

  it("cordon keeps new pods off the node (Pending, Unschedulable); uncordon lets them run", async () => {
    expect(await c.ok(["cordon", "kubectl-node"])).toBe("node/kubectl-node cordoned\n")
    expect(await c.ok(["get", "node", "kubectl-node"])).toMatch(/\nkubectl-node\s+Ready,SchedulingDisabled\s/)
    expect(await c.ok(["run", "later", "--image=busybox", "--restart=Never", "--command", "--", "sleep", "600"])).toBe("pod/later created\n")
    await pollKubectl(c, ["get", "pod", "later", "-o", "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}"], (r) => r.stdout === "Unschedulable")
    expect(await c.ok(["get", "pod", "later"])).toMatch(/\nlater\s+0\/1\s+Pending\s/)
    expect(await c.ok(["uncordon", "kubectl-node"])).toBe("node/kubectl-node uncordoned\n")
    expect(await c.ok(["get", "node", "kubectl-node"])).toMatch(/\nkubectl-node\s+Ready\s/)
    expect(await c.ok(["wait", "--for=condition=Ready", "pod/later", "--timeout=40s"], { timeoutMs: 45_000 })).toBe("pod/later condition met\n")
  }, 70_000)
})
