// Prints every config key that the ConfigDefs of the given jars declare with type PASSWORD, one line per key: the key,
// then the jars (file names without version) that declare it. Run by scripts/password_keys.py (which fetches the jars
// and writes connect_state/password_keys.txt) as a single-file source program on the jars' classpath:
//
//     java -cp 'jvm/secrets/lib/*' scripts/PasswordKeys.java jvm/secrets/lib/kafka-clients-4.3.1.jar ...
//
// Every class of each jar is loaded (and initialized: ConfigDefs are built in static initializers); a class that
// cannot load (an optional dependency missing) is skipped. Read from each class:
//  - its static fields holding a ConfigDef (ProducerConfig's CONFIG, MirrorSourceConfig's CONNECTOR_CONFIG_DEF, ...),
//  - its static methods without parameters returning a ConfigDef (ConsumerConfig.configDef(),
//    SinkConnectorConfig.configDef(), WorkerConfig.baseConfigDef(), Debezium's PostgresConnectorConfig.configDef()),
//  - Debezium's io.debezium.config.Field constants and Field.Set constants (ALL_FIELDS), by reflection, whose type()
//    is PASSWORD (a Field keeps its type even where no ConfigDef of it is reachable statically).
import java.io.File;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Enumeration;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import org.apache.kafka.common.config.ConfigDef;

public class PasswordKeys {
    private static final Map<String, TreeSet<String>> KEYS = new TreeMap<>();
    private static int loaded;
    private static int skipped;
    private static int configDefs;
    private static int fields;

    public static void main(String[] args) throws Exception {
        ClassLoader loader = PasswordKeys.class.getClassLoader();
        for (String path : args) {
            String jar = new File(path).getName().replaceFirst("-[0-9][^-]*(\\.Final)?\\.jar$", "");
            try (JarFile file = new JarFile(path)) {
                Enumeration<JarEntry> entries = file.entries();
                while (entries.hasMoreElements()) {
                    String name = entries.nextElement().getName();
                    if (!name.endsWith(".class") || name.contains("-")) {
                        continue; // module-info, package-info, multi-release copies
                    }
                    Class<?> type;
                    try {
                        type = Class.forName(name.substring(0, name.length() - 6).replace('/', '.'), true, loader);
                    } catch (Throwable missing) {
                        skipped++;
                        continue;
                    }
                    loaded++;
                    read(type, jar);
                }
            }
        }
        for (Map.Entry<String, TreeSet<String>> entry : KEYS.entrySet()) {
            System.out.println(entry.getKey() + " " + String.join(" ", entry.getValue()));
        }
        System.err.printf("classes loaded: %d, not loadable: %d; ConfigDef values read: %d, Debezium Fields read: %d%n",
                loaded, skipped, configDefs, fields);
    }

    private static void read(Class<?> type, String jar) {
        java.lang.reflect.Field[] fields;
        Method[] methods;
        try {
            fields = type.getDeclaredFields();
            methods = type.getDeclaredMethods();
        } catch (Throwable missing) {
            return;
        }
        for (java.lang.reflect.Field field : fields) {
            if (!Modifier.isStatic(field.getModifiers())) {
                continue;
            }
            try {
                field.setAccessible(true);
                value(field.get(null), jar);
            } catch (Throwable unreadable) {
                // not accessible or not initializable: skipped
            }
        }
        for (Method method : methods) {
            if (Modifier.isStatic(method.getModifiers()) && method.getParameterCount() == 0
                    && ConfigDef.class.isAssignableFrom(method.getReturnType())) {
                try {
                    method.setAccessible(true);
                    value(method.invoke(null), jar);
                } catch (Throwable failed) {
                    // skipped
                }
            }
        }
    }

    private static void value(Object value, String jar) throws Exception {
        if (value instanceof ConfigDef def) {
            configDefs++;
            for (ConfigDef.ConfigKey key : def.configKeys().values()) {
                if (key.type == ConfigDef.Type.PASSWORD) {
                    add(key.name, jar);
                }
            }
        } else if (value != null && value.getClass().getName().equals("io.debezium.config.Field")) {
            debeziumField(value, jar);
        } else if (value != null && value.getClass().getName().equals("io.debezium.config.Field$Set")) {
            for (Object field : (Iterable<?>) value) {
                debeziumField(field, jar);
            }
        }
    }

    private static void debeziumField(Object field, String jar) throws Exception {
        fields++;
        Object type = field.getClass().getMethod("type").invoke(field);
        if (type == ConfigDef.Type.PASSWORD) {
            add((String) field.getClass().getMethod("name").invoke(field), jar);
        }
    }

    private static void add(String key, String jar) {
        KEYS.computeIfAbsent(key, k -> new TreeSet<>()).add(jar);
    }
}
