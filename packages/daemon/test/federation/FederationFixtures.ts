/** What the federation tests hand their members: a Work and the objects it holds. */

type Json = Record<string, unknown>

/** A one-replica Deployment whose pod sleeps (the process driver runs it as a command). */
export const deployment = {
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default" },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: "web" } },
    template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "app", image: "busybox", command: ["sleep", "3600"] }] } }
  }
}

/** A ConfigMap a Work can carry. */
export const config = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings", namespace: "default" }, data: { mode: "federated" } }

/** The Work `web` for `member` holding `manifests`. */
export const work = (member: string, manifests: ReadonlyArray<Json>) => ({
  apiVersion: "federation.fleet.koder.dev/v1alpha1",
  kind: "Work",
  metadata: { name: "web", namespace: `fleet-member-${member}` },
  spec: { workload: { manifests } }
})
