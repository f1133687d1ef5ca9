/**
 * The same-host lane and the {@code shm} provider: regmem's verbs between processes of one host over
 * rings in a sealed {@code memfd} per connection, where the target checks every request against its
 * own key tables; each side places bytes only into its own memory (through the ring, or with one
 * {@code process_vm_readv} out of the peer's: a WRITE's source, a READ's granted range). {@code RdmaDevice.open("shm")} finds it
 * through the {@code RdmaProvider} service. Linux only; libc is the only native library.
 *
 * <p>Grant native access to this module too:
 * {@code --enable-native-access=io.regmem.core,io.regmem.registration,io.regmem.shm}.
 */
@SuppressWarnings("module") // io.regmem.ucx is built after this module (as io.regmem.registration's link export)
module io.regmem.shm {
    requires transitive io.regmem.registration;
    requires org.agrona;

    exports io.regmem.registration.shm to io.regmem.ucx;

    provides io.regmem.registration.spi.RdmaProvider with io.regmem.registration.shm.ShmProvider;
}
