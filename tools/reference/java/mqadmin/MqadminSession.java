import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.Base64;
import java.util.List;

/**
 * rmqwire test tooling: runs many official mqadmin commands (MQAdminStartup.main0) in one JVM, so
 * a test pays one JVM start instead of one per command.
 *
 * Protocol: stdin gets one line per command, the arguments Base64-encoded and separated by spaces.
 * For each, stdout gets one line: MARK, the exit status, then the command's stdout and stderr
 * bytes Base64-encoded. What a command prints after asking to exit is cut, as the process would
 * have ended there.
 */
public final class MqadminSession {
    private static final String MARK = "@@rmqwire-mqadmin@@";

    private static volatile Thread running;
    private static volatile Integer exitStatus;
    private static volatile ByteArrayOutputStream out;
    private static volatile ByteArrayOutputStream err;
    private static volatile int outAtExit;
    private static volatile int errAtExit;

    public static void main(String[] ignored) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        Class<?> startup = Class.forName("org.apache.rocketmq.tools.command.MQAdminStartup");
        Method main0 = startup.getMethod("main0", String[].class,
            Class.forName("org.apache.rocketmq.remoting.RPCHook"));
        // The command-line parser calls System.exit on usage errors and -h: note it instead.
        System.setSecurityManager(new SecurityManager() {
            @Override public void checkPermission(Permission perm) { }
            @Override public void checkPermission(Permission perm, Object context) { }
            @Override public void checkExit(int status) {
                if (Thread.currentThread() == running) {
                    if (exitStatus == null) {
                        exitStatus = status;
                        outAtExit = out.size();
                        errAtExit = err.size();
                    }
                    throw new SecurityException("exit " + status);
                }
            }
        });
        Base64.Encoder b64 = Base64.getEncoder();
        Base64.Decoder unb64 = Base64.getDecoder();
        realOut.println(MARK + " ready");
        realOut.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.isEmpty() ? new String[0] : line.split(" ");
            String[] args = new String[parts.length];
            for (int i = 0; i < parts.length; i++) {
                args[i] = new String(unb64.decode(parts[i]), StandardCharsets.UTF_8);
            }
            out = new ByteArrayOutputStream();
            err = new ByteArrayOutputStream();
            exitStatus = null;
            // The platform charset, as a fresh mqadmin JVM prints with.
            PrintStream po = new PrintStream(out, true);
            PrintStream pe = new PrintStream(err, true);
            System.setOut(po);
            System.setErr(pe);
            forgetCommands(startup);
            running = Thread.currentThread();
            try {
                main0.invoke(null, args, null);
            } catch (InvocationTargetException e) {
                if (exitStatus == null) {
                    e.getCause().printStackTrace(pe);
                    exitStatus = 1;
                }
            } finally {
                running = null;
                po.flush();
                pe.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            byte[] o = out.toByteArray();
            byte[] e = err.toByteArray();
            int status = 0;
            if (exitStatus != null) {
                status = exitStatus;
                o = java.util.Arrays.copyOf(o, outAtExit);
                e = java.util.Arrays.copyOf(e, errAtExit);
            }
            realOut.println(MARK + " " + status + " " + b64.encodeToString(o) + " " + b64.encodeToString(e));
            realOut.flush();
        }
        System.exit(0);
    }

    /** main0 registers every sub command again on each call: start each from an empty list. */
    private static void forgetCommands(Class<?> startup) throws IllegalAccessException {
        for (Field f : startup.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) && List.class.isAssignableFrom(f.getType())) {
                f.setAccessible(true);
                ((List<?>) f.get(null)).clear();
            }
        }
    }
}
