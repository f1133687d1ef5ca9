/**
 * The {@code ucx} provider: regmem's verbs over UCX's {@code libucp} (1.13 or later), bound through
 * FFM, with no JNI library. {@code RdmaDevice.open("ucx")} finds it through the
 * {@code RdmaProvider} service once this module is on the module path (or its jar on the class
 * path); without {@code libucp} the open fails with {@code ENODEV} naming the package to install.
 *
 * <p>A connection whose peer is on the same host takes the shm provider's same-host lane by default
 * (option {@code sameHostLane}). Grant native access to these modules:
 * {@code --enable-native-access=io.regmem.core,io.regmem.registration,io.regmem.shm,io.regmem.ucx}.
 */
module io.regmem.ucx {
    requires transitive io.regmem.registration;
    requires org.agrona;
    requires jdk.net;
    requires io.regmem.shm;

    provides io.regmem.registration.spi.RdmaProvider with io.regmem.registration.ucx.UcxProvider;
}
