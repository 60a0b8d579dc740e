/**
 * Embedding Fleet in your own program: the API pipeline (authentication, RBAC, admission,
 * validation, watch caches) over a SQLite file, the program's own CRD and reconciler next to two
 * built-in controllers, served over plain HTTP on loopback — no daemon, no agent, no containers.
 *
 *   SqliteStore ─▶ ApiServer (tokens ─▶ RBAC ─▶ admission ─▶ strategy) ─▶ NodeHttp (http://127.0.0.1:PORT)
 *                     ▲
 *                     └── ApiClient (loopback token, in memory) ◀── Controller.start([website, garbage-collector, namespace])
 *
 * Run it: `node --conditions=@koder/source --import tsx examples/embed/main.ts --data /tmp/sites.db`
 * with `EMBED_ADMIN_TOKEN` (and optionally `EMBED_VIEWER_TOKEN`, a read-only user) in the
 * environment; kubectl works against it with `--server http://127.0.0.1:PORT --token …`.
 * It prints `embed: listening on http://…` when ready and exits 0 on SIGTERM or SIGINT.
 */
import { AdmissionPlugins, ApiClient, ApiError, ApiServer, BootstrapPolicy, Client, Controller, Controllers, type Http, InProcess, RbacEscalation, RbacIndex, Status } from "@koder/fleet-core"
import { SqliteStore } from "@koder/fleet-store-sqlite"
import { Deferred, Effect } from "effect"
import { randomBytes } from "node:crypto"
import { parseArgs } from "node:util"
import * as NodeHttp from "./NodeHttp.js"
import * as Website from "./Website.js"

const { values: flags } = parseArgs({ options: { data: { type: "string", default: "embed.db" }, listen: { type: "string", default: "127.0.0.1:0" } } })
const [host, port] = [flags.listen.slice(0, flags.listen.lastIndexOf(":")), Number(flags.listen.slice(flags.listen.lastIndexOf(":") + 1))]

// Who may call: bearer tokens mapped to users. system:masters is cluster-admin in the bootstrap RBAC policy.
const controllerToken = randomBytes(32).toString("base64url")
const users = new Map<string, Http.UserInfo>([[controllerToken, { name: "system:kube-controller-manager", uid: "controllers", groups: ["system:masters", "system:authenticated"] }]])
if (process.env["EMBED_ADMIN_TOKEN"]) users.set(process.env["EMBED_ADMIN_TOKEN"], { name: "admin", uid: "admin", groups: ["system:masters", "system:authenticated"] })
if (process.env["EMBED_VIEWER_TOKEN"]) users.set(process.env["EMBED_VIEWER_TOKEN"], { name: "viewer", uid: "viewer", groups: ["system:authenticated"] })

const authenticate = (headers: Readonly<Record<string, string | undefined>>) => {
  const token = /^Bearer (.+)$/.exec(headers["authorization"] ?? "")?.[1]
  const user = token === undefined ? undefined : users.get(token)
  return user === undefined ? Effect.fail(ApiError.of(Status.unauthorized())) : Effect.succeed(user)
}

/** Create `object` unless it exists (restarts find their own state in the SQLite file). */
const ensure = (client: Client.Client, object: Client.JsonObject) =>
  client.create(object).pipe(Effect.catchIf((e) => e.status.code === 409, () => Effect.void))

const program = Effect.gen(function* () {
  const store = yield* SqliteStore.make({ filename: flags.data })

  // Authorization: Kubernetes RBAC with the built-in roles (admin, edit, view, …), kept in the store.
  yield* BootstrapPolicy.ensure(store)
  const rbac = yield* RbacIndex.make(store)
  const admission = yield* AdmissionPlugins.make({ store, region: "local" })
  const api = yield* ApiServer.make({
    store,
    authenticate,
    authorize: rbac.authorize,
    admission: [...admission, RbacEscalation.plugin(rbac.policy)]
  })

  // The program's controllers talk to the API in memory; their writes still pass the whole pipeline.
  const client = Client.make({ server: "http://loopback", token: controllerToken, transport: InProcess.transport(api.handle, { client: "controllers" }) })
  yield* ensure(client, { apiVersion: "v1", kind: "Namespace", metadata: { name: "default" } })
  yield* ensure(client, Website.crd)
  if (process.env["EMBED_VIEWER_TOKEN"]) {
    yield* ensure(client, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "viewer-view" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "view" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "viewer" }]
    })
  }
  yield* Controller.start({
    component: "sites-controller",
    reconcilers: [Website.reconciler(), Controllers.GarbageCollector.reconciler(), Controllers.Namespace.reconciler()]
  }).pipe(Effect.provideService(ApiClient.ApiClient, client))

  const http = yield* Effect.acquireRelease(
    Effect.promise(() => NodeHttp.listen(api.handle, host, port)),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
      })
  )
  console.log(`embed: listening on ${http.url}`)

  const stop = yield* Deferred.make<string>()
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => Deferred.unsafeDone(stop, Effect.succeed(signal)))
  const why = yield* Deferred.await(stop)
  console.log(`embed: ${why}, stopping`)
})

Effect.runPromise(Effect.scoped(program)).then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(`embed: ${e instanceof Error ? e.message : String(e)}`)
    process.exit(1)
  }
)
