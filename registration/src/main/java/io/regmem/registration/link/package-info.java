/**
 * The connection handshake between processes that every provider connecting processes shares (ucx,
 * shm): the secret ({@link io.regmem.registration.link.Secret}), the authenticated handshake and life
 * line over TCP ({@link io.regmem.registration.link.Link}) and the listener that admits only
 * authenticated requesters ({@link io.regmem.registration.link.Listener}). Exported to the provider
 * modules only: not API, it changes without notice.
 */
package io.regmem.registration.link;
