/**
 * Registration, verbs objects, rw contexts, request pools and providers. Built from issue 3 on:
 * this module exists now so that the build has its final shape and depends on core one way only.
 */
package io.regmem.registration;
