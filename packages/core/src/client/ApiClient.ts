/**
 * The API client a long-running service acts through (the controller runner and manager, the
 * scheduler, the node agent), as a `Context.Tag` beside the Store and the Runtime: the process
 * that wires a service decides whose identity it acts with (`system:node:<name>`, the controller
 * user, an embedding service's own token) and provides it; the service only asks for it.
 */
import { Context, Layer } from "effect"
import type * as Client from "./Client.js"

/** The client the services in this context act through. */
export class ApiClient extends Context.Tag("@koder/fleet-core/ApiClient")<ApiClient, Client.Client>() {}

/** Provide `client` as the ApiClient. */
export const layer = (client: Client.Client): Layer.Layer<ApiClient> => Layer.succeed(ApiClient, client)
