/**
 * @koder/fleet-kbox-client: the Runtime port spoken to a kbox daemon over a Unix socket
 * (DESIGN §8). Built with the node agent; this package holds its place in the workspace.
 */
export const apiVersion = "v1" as const
