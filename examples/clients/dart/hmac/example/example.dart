import 'dart:io';

import 'package:tollgate_hmac/tollgate_hmac.dart';

Future<void> main() async {
  final client = HmacClient(Platform.environment['TOLLGATE_API_KEY']!);
  try {
    final response = await client.execute(HmacParams(message: 'hello', secret: 'key'));
    print(response.data);
    print('credits left: ${response.credits?.remaining}');
  } finally {
    client.close();
  }
}
